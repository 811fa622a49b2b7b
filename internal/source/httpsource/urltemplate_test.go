package httpsource

import (
	"strings"
	"testing"
)

func TestExpandURL(t *testing.T) {
	vars := URLVars{Node: "edge-0042", Arch: "arm64", Labels: map[string]string{"site": "lyon", "berth.io/ring": "canary", "odd": "a b/c?d&e"}}
	for _, tt := range []struct {
		template, want, err string
	}{
		{template: "https://m.example/pods.yaml", want: "https://m.example/pods.yaml"},
		{template: "https://m.example/{label.site}/{node}.yaml", want: "https://m.example/lyon/edge-0042.yaml"},
		{template: "https://m.example/{arch}/{label.berth.io/ring}.yaml?node={node}", want: "https://m.example/arm64/canary.yaml?node=edge-0042"},
		{template: "https://{label.site}.m.example/x", want: "https://lyon.m.example/x"},
		{template: "https://m.example/{label.odd}", want: "https://m.example/a%20b%2Fc%3Fd%26e"},
		{template: "https://m.example/{label.region}/x", err: `placeholder {label.region}: no label "region" in the config file's labels (there are berth.io/ring, odd, site)`},
		{template: "https://m.example/{nodes}", err: "placeholder {nodes}: unknown: use {node}, {arch} or {label.KEY}"},
		{template: "https://m.example/{}", err: "placeholder {}: unknown"},
		{template: "https://m.example/{node", err: `unmatched "{"`},
		{template: "https://m.example/{no{de}", err: `unmatched "{"`},
		{template: "https://m.example/node}", err: `unmatched "}"`},
		{template: "https://u:secret@m.example/{x}?token=abc", err: "REDACTED"},
	} {
		got, err := ExpandURL(tt.template, vars)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ExpandURL(%q) = %q, %v; want %q", tt.template, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ExpandURL(%q) = %q, %v; want an error containing %q", tt.template, got, err, tt.err)
		case err != nil && (strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "abc")):
			t.Errorf("ExpandURL(%q): the error %q shows a secret", tt.template, err)
		}
	}
	if _, err := ExpandURL("https://m.example/{label.site}", URLVars{}); err == nil || !strings.Contains(err.Error(), "there are none") {
		t.Errorf("no labels: %v", err)
	}
	if _, err := ExpandURL("https://m.example/{label.site}", URLVars{Labels: map[string]string{"site": ""}}); err == nil || !strings.Contains(err.Error(), "empty value") {
		t.Errorf("empty label: %v", err)
	}
}
