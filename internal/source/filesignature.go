package source

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/signature"
	"k8s.io/apimachinery/pkg/util/sets"
)

// signatureFileOf is the manifest a detached signature in the manifest
// directory signs ("web.yaml.sig" signs "web.yaml"), or "" when the name is
// not a manifest's signature.
func signatureFileOf(name string) string {
	base, ok := strings.CutSuffix(name, signature.Suffix)
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
	m, err := readManifestFile(path+signature.Suffix, signature.MaxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(m.data) > signature.MaxBytes {
		return nil, signature.ErrTooLarge
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

// verifySignedFile verifies a manifest file read from p against its
// signature. It returns the verified body, or the result to record instead
// of parsing the file: a refusal, which podsnapshot.KeepLastGood turns into "the pods
// it defined before keep running".
func (s *fileSource) verifySignedFile(p string, data, sig []byte, sigErr error) (signature.Verified, *podspec.Result) {
	if sigErr != nil {
		return signature.Verified{}, signedRefusal(p, s.signed.Refuse(signature.ReasonBadSignature, fmt.Errorf("cannot read its signature: %v", sigErr)))
	}
	b, err := s.signed.Verify(data, sig, s.clock.Now())
	if err != nil {
		return signature.Verified{}, signedRefusal(p, err)
	}
	return b, nil
}

// admitSignedFile checks the serial of the verified body of p, parsed as
// fresh, against what it defines and what it replaces (prev, what p holds
// now): a refused body yields no pod, so it never wins a duplicate name
// from the manifest running the newer version. nil admits it.
func (s *fileSource) admitSignedFile(p string, b signature.Verified, fresh, prev podspec.Result) *podspec.Result {
	if err := s.signed.Admit(p, b, append(signature.Keys(fresh), signature.Keys(prev)...)); err != nil {
		return signedRefusal(p, err)
	}
	return nil
}

// signedRefusal is the result recording err, a refusal of the signature
// check (every error of signature.Origin is a *signature.Refusal, with its
// reason), for the manifest file p.
func signedRefusal(p string, err error) *podspec.Result {
	reason := signature.ReasonBadSignature
	var re *signature.Refusal
	if errors.As(err, &re) {
		reason = re.Reason
	}
	return &podspec.Result{Problems: []podspec.Problem{{Source: podspec.SourceFile, Origin: p, Reason: reason, Message: err.Error()}}}
}

// dropSuperseded drops from each file what another file's body defined
// since with a higher serial: two files may both hold a pod, each accepted
// when it was read (both present at a first start, or the pod moved to a
// file signed anew), and the older version must not run because its file
// comes first by name. What a file holds of an unknown serial (its state
// restored from an earlier version without any) is left as it is.
func (s *fileSource) dropSuperseded() {
	if s.signed == nil {
		return
	}
	for p, f := range s.files {
		stale := map[string]uint64{}
		for k, n := range f.serials {
			if last, ok := s.signed.Serials.SerialOf(k); ok && last > n {
				stale[k] = last
			}
		}
		if len(stale) == 0 {
			continue
		}
		superseded := func(line int, k, name, namespace string) podspec.Problem {
			pr := podspec.Problem{Source: podspec.SourceFile, Origin: p, Line: line, Field: "metadata.name", Reason: signature.ReasonReplayed,
				Message: fmt.Sprintf("serial %d of this manifest is older than %d, the last one accepted for %s from another manifest: this version no longer runs; remove it, or sign it anew with a serial above %d",
					f.serials[k], stale[k], signature.DescribeKey(k), stale[k])}
			if name != "" {
				pr.Name, pr.Namespace = name, namespace
			}
			s.log.Warn("manifest rejected", "origin", p, "line", line, "field", pr.Field, "reason", pr.Reason,
				"pod", name, "namespace", namespace, "err", pr.Message)
			return pr
		}
		res := f.res
		out := podspec.Result{Problems: slices.Clone(res.Problems)}
		for i, pod := range res.Pods {
			k := signature.Key("", pod.Name, pod.Namespace)
			if _, ok := stale[k]; ok {
				out.Problems = append(out.Problems, superseded(res.Lines[i], k, pod.Name, pod.Namespace))
				continue
			}
			out.AddPodOf(res, i)
		}
		for _, o := range res.Objects {
			k := signature.Key(o.Identity())
			if _, drop := stale[k]; drop {
				out.Problems = append(out.Problems, superseded(0, k, "", ""))
				continue
			}
			out.Objects = append(out.Objects, o)
		}
		slices.SortStableFunc(out.Problems, func(a, b podspec.Problem) int { return a.Line - b.Line })
		for k := range stale {
			delete(f.serials, k)
		}
		f.res = out
	}
}

// liveSerials are the origins (files) and names (their pods and objects)
// the file source holds now, which the serial state keeps past its bound.
func (s *fileSource) liveSerials() (origins, names sets.Set[string]) {
	origins, names = sets.New[string](), sets.New[string]()
	for p, f := range s.files {
		origins.Insert(p)
		names.Insert(signature.Keys(f.res)...)
	}
	return origins, names
}
