package podlogs

import (
	"errors"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	ts := time.Date(2016, 10, 6, 0, 17, 9, 669794202, time.UTC)
	tests := []struct {
		name    string
		line    string
		want    Entry
		wantErr bool
	}{
		{"full stdout", "2016-10-06T00:17:09.669794202Z stdout F hello world", Entry{Time: ts, Stream: "stdout", Message: []byte("hello world")}, false},
		{"partial stderr", "2016-10-06T00:17:09.669794202Z stderr P part", Entry{Time: ts, Stream: "stderr", Partial: true, Message: []byte("part")}, false},
		{"empty message", "2016-10-06T00:17:09.669794202Z stdout F ", Entry{Time: ts, Stream: "stdout", Message: []byte("")}, false},
		{"no message field", "2016-10-06T00:17:09.669794202Z stdout F", Entry{Time: ts, Stream: "stdout"}, false},
		{"message keeps spaces", "2016-10-06T00:17:09.669794202Z stdout F  a  b ", Entry{Time: ts, Stream: "stdout", Message: []byte(" a  b ")}, false},
		{"extra tags", "2016-10-06T00:17:09.669794202Z stdout F:x:y msg", Entry{Time: ts, Stream: "stdout", Message: []byte("msg")}, false},
		{"zone offset", "2016-10-06T02:17:09.669794202+02:00 stdout F m", Entry{Time: ts, Stream: "stdout", Message: []byte("m")}, false},
		{"plain text", "hello", Entry{}, true},
		{"bad time", "yesterday stdout F m", Entry{}, true},
		{"bad stream", "2016-10-06T00:17:09.669794202Z stdin F m", Entry{}, true},
		{"bad tag", "2016-10-06T00:17:09.669794202Z stdout X m", Entry{}, true},
		{"docker json", `{"log":"m\n","stream":"stdout","time":"2016-10-06T00:17:09.669794202Z"}`, Entry{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLine([]byte(tt.line))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				if !errors.Is(err, errFormat) {
					t.Errorf("err = %v, want it to wrap errFormat", err)
				}
				return
			}
			if !got.Time.Equal(tt.want.Time) || got.Stream != tt.want.Stream || got.Partial != tt.want.Partial || string(got.Message) != string(tt.want.Message) {
				t.Errorf("got %+v (%q), want %+v (%q)", got, got.Message, tt.want, tt.want.Message)
			}
		})
	}
}
