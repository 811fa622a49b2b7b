package docscheck

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrStale is what Generated returns when a page's generated section
// differs from what its generator makes now.
var ErrStale = errors.New("out of date")

// Generated compares the section of page between the lines begin and end
// with generated. With update (UPDATE_GOLDEN=1 in the tests) it rewrites
// the section instead; otherwise a difference is ErrStale, wrapped with
// the page's current section so the failure shows both.
func Generated(page, begin, end, generated string, update bool) error {
	data, err := os.ReadFile(page)
	if err != nil {
		return err
	}
	text := string(data)
	b := strings.Index(text, begin)
	e := strings.Index(text, end)
	if b < 0 || e < b {
		return fmt.Errorf("%s lacks the markers %q ... %q", page, begin, end)
	}
	current := text[b+len(begin) : e]
	if current == generated {
		return nil
	}
	if update {
		text = text[:b+len(begin)] + generated + text[e:]
		return os.WriteFile(page, []byte(text), 0o644)
	}
	return fmt.Errorf("%s is %w\n--- generated\n%s\n--- page\n%s", page, ErrStale, generated, current)
}
