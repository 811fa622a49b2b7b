package signature

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/hiddeco/sshsig"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-agent/berth/internal/statefile"
)

// Namespace is the namespace manifests are signed in
// (ssh-keygen -Y sign -n berth-manifest): a signature made for git, a file
// or anything else with the same key is never taken for a manifest's.
const Namespace = "berth-manifest"

// SerialPrefix starts the first line of a signed body, followed by its
// serial: "# berth.io/serial: 42". A comment, so that a serial bump leaves
// every pod's content, and so its UID, unchanged: an annotation would
// restart every pod whenever any of them changed.
const SerialPrefix = "# berth.io/serial:"

// Problem reasons of a signed source whose body is refused. Pods keep
// running as they were; the reason is also the label of
// berth_manifest_signature_failures_total.
const (
	// ReasonUnsigned: the server has no signature for the body (404/410).
	ReasonUnsigned = "Unsigned"
	// ReasonBadSignature: the signature is malformed, made by a key not
	// allowed, in another namespace, or does not match the body.
	ReasonBadSignature = "BadSignature"
	// ReasonNoSerial: validly signed, but the first line is not a serial.
	ReasonNoSerial = "NoSerial"
	// ReasonReplayed: validly signed, with a serial lower than the last
	// one accepted from its manifest file or URL, or for a pod, ConfigMap
	// or Secret it defines or replaces, whatever manifest that came in.
	ReasonReplayed = "Replayed"
)

// Refusal is a refused signed body, with the Problem reason to report.
type Refusal struct {
	Reason string
	Err    error
}

func (e *Refusal) Error() string { return e.Err.Error() }

// Limits of what is read for signatures: an armored SSH signature is under
// 2 KiB even with an RSA-8192 key; an allowed signers file is a few lines.
const (
	MaxBytes               = 64 << 10
	maxAllowedSignersBytes = 1 << 20
)

// Signers are the keys a signed source accepts, from an allowed signers
// file (ssh-keygen(1) ALLOWED SIGNERS: "principals [options] keytype
// base64-key [comment]") or a file of bare public keys ("keytype
// base64-key [comment]", as in a .pub file or authorized_keys without
// options). It is read once, at start, and never changes.
type Signers struct {
	file string
	keys []allowedSigner
}

// allowedSigner is one line of an allowed signers file.
type allowedSigner struct {
	line       int
	principals string // "" for a bare public key
	key        ssh.PublicKey
	namespaces []string  // nil: any namespace
	after      time.Time // zero: no bound
	before     time.Time // zero: no bound
}

// LoadAllowedSigners reads an allowed signers file. The file decides who
// may run root pods on this machine, so it must be a regular file owned by
// berth's user (root) that no one else may write; it is opened without
// blocking or following a symlink, and read up to a limit.
func LoadAllowedSigners(path string) (*Signers, error) {
	data, err := statefile.ReadOwned(path, maxAllowedSignersBytes)
	if err != nil {
		return nil, fmt.Errorf("allowed signers %s: %w", path, err)
	}
	return ParseAllowedSigners(data, path)
}

// ParseAllowedSigners parses the content of an allowed signers file named
// name (for errors). Every line must be usable: a typo in the file that
// decides who runs pods is an error at start, naming its line, rather than
// a key silently ignored. A key limited to other namespaces is kept (it
// never matches), so one file can serve git and berth.
func ParseAllowedSigners(data []byte, name string) (*Signers, error) {
	s := &Signers{file: name}
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		k, err := parseSignerLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
		}
		k.line = i + 1
		s.keys = append(s.keys, k)
	}
	if len(s.keys) == 0 {
		return nil, fmt.Errorf("%s: no public key in the file", name)
	}
	return s, nil
}

// parseSignerLine parses one non-empty line: a bare public key, or
// principals, options and a public key.
func parseSignerLine(line string) (allowedSigner, error) {
	if key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(line)); err == nil && len(opts) == 0 {
		return allowedSigner{key: key}, nil
	}
	principals, rest := cutField(line)
	if principals == "" || rest == "" {
		return allowedSigner{}, errors.New("want \"principals [options] keytype base64-key\" or \"keytype base64-key\"")
	}
	key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return allowedSigner{}, fmt.Errorf("public key after the principals %q: %w", principals, err)
	}
	k := allowedSigner{principals: strings.Trim(principals, `"`), key: key}
	for _, o := range opts {
		name, value, hasValue := strings.Cut(o, "=")
		value = strings.Trim(value, `"`)
		switch strings.ToLower(name) {
		case "namespaces":
			if !hasValue || value == "" {
				return allowedSigner{}, errors.New("namespaces needs a value")
			}
			k.namespaces = strings.Split(value, ",")
		case "valid-after", "valid-before":
			t, err := parseSignerTime(value)
			if err != nil {
				return allowedSigner{}, fmt.Errorf("%s: %w", name, err)
			}
			if strings.EqualFold(name, "valid-after") {
				k.after = t
			} else {
				k.before = t
			}
		case "cert-authority":
			return allowedSigner{}, errors.New("cert-authority is not supported: list the signing keys themselves")
		default:
			return allowedSigner{}, fmt.Errorf("unknown option %q", name)
		}
	}
	return k, nil
}

// cutField splits the first whitespace-separated field, which may be
// double-quoted, from the rest of line.
func cutField(line string) (string, string) {
	end := strings.IndexAny(line, " \t")
	if strings.HasPrefix(line, `"`) {
		if q := strings.Index(line[1:], `"`); q >= 0 {
			end = q + 2
		}
	}
	if end < 0 || end > len(line) {
		return line, ""
	}
	return line[:end], strings.TrimSpace(line[end:])
}

// parseSignerTime reads ssh-keygen's YYYYMMDD[HHMM[SS]][Z] times: local
// time unless Z (UTC) ends it.
func parseSignerTime(v string) (time.Time, error) {
	loc := time.Local
	if strings.HasSuffix(v, "Z") || strings.HasSuffix(v, "z") {
		v, loc = v[:len(v)-1], time.UTC
	}
	var layout string
	switch len(v) {
	case 8:
		layout = "20060102"
	case 12:
		layout = "200601021504"
	case 14:
		layout = "20060102150405"
	default:
		return time.Time{}, fmt.Errorf("want YYYYMMDD[HHMM[SS]][Z], got %q", v)
	}
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("want YYYYMMDD[HHMM[SS]][Z], got %q", v)
	}
	return t, nil
}

// Verify checks that sig (an armored SSH signature, as ssh-keygen -Y sign
// writes it) is a signature of body in Namespace by one of the
// allowed keys, valid at now. It returns who signed: the principals of the
// key's line, or the key's fingerprint for a bare key.
func (s *Signers) Verify(body, sig []byte, now time.Time) (string, error) {
	parsed, err := sshsig.Unarmor(sig)
	if err != nil {
		return "", fmt.Errorf("not an SSH signature: %w", err)
	}
	if parsed.Namespace != Namespace {
		return "", fmt.Errorf("signed in namespace %q, berth takes only %q (ssh-keygen -Y sign -n %s)",
			parsed.Namespace, Namespace, Namespace)
	}
	fp := ssh.FingerprintSHA256(parsed.PublicKey)
	want := parsed.PublicKey.Marshal()
	var refused error
	for _, k := range s.keys {
		if !bytes.Equal(k.key.Marshal(), want) {
			continue
		}
		if err := k.usable(now); err != nil {
			refused = fmt.Errorf("key %s (%s line %d) %w", fp, s.file, k.line, err)
			continue
		}
		if err := sshsig.Verify(bytes.NewReader(body), parsed, k.key, parsed.HashAlgorithm, Namespace); err != nil {
			return "", fmt.Errorf("signature by %s does not match the body: %w", fp, err)
		}
		if k.principals != "" {
			return k.principals, nil
		}
		return fp, nil
	}
	if refused != nil {
		return "", refused
	}
	return "", fmt.Errorf("signed by key %s, which is not in %s", fp, s.file)
}

// usable says why a key may not sign manifests now, if it may not.
func (k allowedSigner) usable(now time.Time) error {
	switch {
	case k.namespaces != nil && !namespaceAllowed(k.namespaces):
		return fmt.Errorf("may sign only in namespaces %s", strings.Join(k.namespaces, ","))
	case !k.after.IsZero() && now.Before(k.after):
		return fmt.Errorf("is valid only after %s", k.after.Format(time.RFC3339))
	case !k.before.IsZero() && !now.Before(k.before):
		return fmt.Errorf("was valid only before %s", k.before.Format(time.RFC3339))
	}
	return nil
}

// namespaceAllowed matches Namespace against a namespaces= list
// of patterns with * and ?, as ssh-keygen does.
func namespaceAllowed(patterns []string) bool {
	for _, p := range patterns {
		if globMatch(strings.TrimSpace(p), Namespace) {
			return true
		}
	}
	return false
}

// globMatch is OpenSSH's match_pattern: * any run of characters, ? one.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := 0; i <= len(s); i++ {
				if globMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
		}
		pattern, s = pattern[1:], s[1:]
	}
	return s == ""
}

// serialLine is the first line of a signed body.
var serialLine = regexp.MustCompile(`^# berth\.io/serial: *([0-9]{1,20}) *\r?$`)

// ParseSerial reads the serial from the first line of a signed body
// ("# berth.io/serial: 42").
func ParseSerial(body []byte) (uint64, error) {
	first, _, _ := bytes.Cut(body, []byte("\n"))
	m := serialLine.FindSubmatch(first)
	if m == nil {
		return 0, fmt.Errorf("the first line of a signed manifest must be %q followed by a number, the serial of this version", SerialPrefix)
	}
	n, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("serial %s: %w", m[1], err)
	}
	return n, nil
}

// Metrics counts refused signed bodies.
type Metrics struct {
	failures *prometheus.CounterVec
}

// NewMetrics registers berth_manifest_signature_failures_total on
// reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{failures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_manifest_signature_failures_total",
		Help: "Signed manifest bodies refused, by source and reason (Unsigned, BadSignature, NoSerial, Replayed).",
	}, []string{"source", "reason"})}
	reg.MustRegister(m.failures)
	return m
}

// failed counts one refused body; a nil *Metrics counts nothing.
func (m *Metrics) failed(source, reason string) {
	if m != nil {
		m.failures.WithLabelValues(source, reason).Inc()
	}
}

// Origin checks the bodies of a signed source against the signers
// and the serials accepted before (Serials). It belongs to its
// source's goroutine.
type Origin struct {
	signers *Signers
	source  string
	Serials *Serials
	metrics *Metrics
	log     *slog.Logger
	// accepted is the serial of the body last accepted from each origin,
	// to log each new version once.
	accepted map[string]uint64
}

// NewOrigin returns the signature check of source: bodies signed by one
// of signers, whose serials serials keeps; refusals are counted in
// metrics (nil counts nothing).
func NewOrigin(signers *Signers, serials *Serials, metrics *Metrics, source string, log *slog.Logger) *Origin {
	return &Origin{signers: signers, source: source, log: log, Serials: serials, metrics: metrics}
}

// Verified is a body whose signature checked out: who signed it, and
// its serial, not yet checked against those accepted before.
type Verified struct {
	signer string
	Serial uint64
}

// Verify checks body against sig and reads its serial. A nil sig is a body
// without signature. The error is a counted *Refusal with the Problem
// reason; the caller logs it.
func (o *Origin) Verify(body, sig []byte, now time.Time) (Verified, error) {
	b, reason, err := o.verifyBody(body, sig, now)
	if err != nil {
		return Verified{}, o.Refuse(reason, err)
	}
	return b, nil
}

func (o *Origin) verifyBody(body, sig []byte, now time.Time) (b Verified, reason string, err error) {
	if sig == nil {
		return b, ReasonUnsigned, errors.New("no signature (" + Suffix + ") beside the body; berth runs only signed manifests from this source")
	}
	if b.signer, err = o.signers.Verify(body, sig, now); err != nil {
		return b, ReasonBadSignature, err
	}
	if b.Serial, err = ParseSerial(body); err != nil {
		return b, ReasonNoSerial, err
	}
	return b, "", nil
}

// Refuse counts a refused body and returns its *Refusal.
func (o *Origin) Refuse(reason string, err error) error {
	o.metrics.failed(o.source, reason)
	return &Refusal{Reason: reason, Err: fmt.Errorf("signed manifest refused: %w", err)}
}

// Admit checks the serial of a verified body from origin against the
// serials accepted before: from origin, and for each of keys, which must
// be what the body defines and what it replaces (Keys of the parsed
// body and of what origin holds now). A refusal is a counted *Refusal
// with ReasonReplayed naming what has the newer serial.
func (o *Origin) Admit(origin string, b Verified, keys []string) error {
	key, last, older := o.Serials.conflict(origin, keys, b.Serial)
	if !older {
		return nil
	}
	what := "this manifest"
	if key != "" {
		what = DescribeKey(key)
	}
	return o.Refuse(ReasonReplayed, fmt.Errorf("serial %d is older than %d, the last one accepted for %s: a replayed or rolled back version; sign the version you want with a serial above %d",
		b.Serial, last, what, last))
}

// Accept records an admitted body's serial for origin and for raised: what
// the body defines and what it removed from origin (not what origin keeps
// of an earlier version because the body rejects it). It logs each new
// version once; Flush persists it.
func (o *Origin) Accept(origin string, b Verified, raised []string) {
	o.Serials.record(origin, raised, b.Serial)
	if prev, ok := o.accepted[origin]; !ok || prev != b.Serial {
		if o.accepted == nil {
			o.accepted = map[string]uint64{}
		}
		o.accepted[origin] = b.Serial
		o.log.Info("signed manifest accepted", "origin", origin, "serial", b.Serial, "signer", b.signer)
	}
}

// RaisedKeys are the keys a body accepted from an origin raises: those of
// fresh (the parsed body), and those of prev (what the origin held) that
// cur (the origin's result after podsnapshot.KeepLastGood) no longer holds.
func RaisedKeys(fresh, prev, cur podspec.Result) []string {
	keys := Keys(fresh)
	held := sets.New(Keys(cur)...)
	for _, k := range Keys(prev) {
		if !held.Has(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// ItemSerials are the serials of what cur (after podsnapshot.KeepLastGood) holds: n for
// what fresh (the accepted body) defines, the serial in prevSerials for
// what is kept from before; unknown (absent) otherwise.
func ItemSerials(fresh, cur podspec.Result, n uint64, prevSerials map[string]uint64) map[string]uint64 {
	isFresh := sets.New(Keys(fresh)...)
	out := map[string]uint64{}
	for _, k := range Keys(cur) {
		if isFresh.Has(k) {
			out[k] = n
		} else if s, ok := prevSerials[k]; ok {
			out[k] = s
		}
	}
	return out
}

// Suffix names a detached signature: <url>.sig, as ssh-keygen
// -Y sign writes <file>.sig.
const Suffix = ".sig"

// ErrTooLarge is a signature past MaxBytes.
var ErrTooLarge = fmt.Errorf("signature is larger than the limit of %d bytes", MaxBytes)

// Read reads an armored signature, bounded.
func Read(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, ErrTooLarge
	}
	return data, nil
}
