package source

import "testing"

func TestIsManifestName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"web.yaml", true},
		{"web.yml", true},
		{"web.json", true},
		{"WEB.YAML", true},
		{"web.yaml.backup", false},
		{"web.yaml~", false},
		{".web.yaml.swp", false},
		{"web.yaml.swp", false},
		{"#web.yaml#", false},
		{".#web.yaml", false},
		{".hidden.yaml", false},
		{"..data", false},
		{"4913", false},
		{"README", false},
		{"web", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isManifestName(tt.name); got != tt.want {
			t.Errorf("isManifestName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
