package manifest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// signatureFileOf is the manifest a detached signature in the manifest
// directory signs ("web.yaml.sig" signs "web.yaml"), or "" when the name is
// not a manifest's signature.
func signatureFileOf(name string) string {
	base, ok := strings.CutSuffix(name, signatureSuffix)
	if !ok || !isManifestName(filepath.Base(base)) {
		return ""
	}
	return base
}

// readSignatureFile reads <path>.sig, the detached signature of a manifest
// file; nil, nil when there is none. It is read as manifests are (regular
// files only, never blocking, bounded), but who may write it does not
// matter: a signature is checked, not trusted.
func readSignatureFile(path string) ([]byte, error) {
	m, err := readManifestFile(path+signatureSuffix, maxSignatureBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(m.data) > maxSignatureBytes {
		return nil, errSignatureTooLarge
	}
	return m.data, nil
}

// signedSum is what a file source compares to skip re-reading an unchanged
// manifest: its bytes and, when signatures are required, its signature's,
// so a new signature alone gets the manifest checked again.
func signedSum(data, sig []byte) [sha256.Size]byte {
	if sig == nil {
		return sha256.Sum256(data)
	}
	h := sha256.New()
	h.Write(data)
	h.Write([]byte{0})
	h.Write(sig)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// checkSignedFile verifies a manifest file read from p against its
// signature when the source requires signatures. It returns the result to
// record instead of parsing the file (a refusal, which keepLastGood turns
// into "the pods it defined before keep running"), or nil to go on.
func (s *fileSource) checkSignedFile(p string, data, sig []byte, sigErr error) *Result {
	if s.signed == nil {
		return nil
	}
	if sigErr != nil {
		s.signed.metrics.failed(SourceFile, ReasonBadSignature)
		return &Result{Problems: []Problem{{Source: SourceFile, Origin: p, Reason: ReasonBadSignature,
			Message: fmt.Sprintf("signed manifest refused: cannot read its signature: %v", sigErr)}}}
	}
	if err := s.signed.check(p, data, sig, s.clock.Now()); err != nil {
		return &Result{Problems: []Problem{{Source: SourceFile, Origin: p, Reason: reasonOf(err), Message: err.Error()}}}
	}
	return nil
}
