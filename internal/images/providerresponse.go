package images

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	sigsjson "sigs.k8s.io/json"
)

// The exec protocol's versions the kubelet speaks: the request and the
// response have the same fields in each, and a plugin must answer in the
// version it was asked in.
const (
	ProviderAPIVersionV1       = "credentialprovider.kubelet.k8s.io/v1"
	providerAPIVersionV1beta1  = "credentialprovider.kubelet.k8s.io/v1beta1"
	providerAPIVersionV1alpha1 = "credentialprovider.kubelet.k8s.io/v1alpha1"
)

// ProviderAPIVersions are the exec protocol versions a provider's
// apiVersion may name.
func ProviderAPIVersions() []string {
	return []string{providerAPIVersionV1alpha1, providerAPIVersionV1beta1, ProviderAPIVersionV1}
}

// encodeProviderRequest is the CredentialProviderRequest for repo.
func encodeProviderRequest(apiVersion, repo string) ([]byte, error) {
	req := credentialproviderv1.CredentialProviderRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "CredentialProviderRequest"},
		Image:    repo,
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	return data, nil
}

// parseProviderResponse decodes a plugin's stdout as the kubelet does,
// strictly (no unknown or repeated field), and checks it: the kind, the
// apiVersion it was asked in, a cacheKeyType of Image, Registry or Global,
// and auth keys that are registry patterns. A negative cacheDuration keeps
// nothing, as in the kubelet. Errors say what is wrong, never what the
// response holds beyond its field names and protocol values.
func parseProviderResponse(data []byte, apiVersion string) (*credentialproviderv1.CredentialProviderResponse, error) {
	var resp credentialproviderv1.CredentialProviderResponse
	strict, err := sigsjson.UnmarshalStrict(data, &resp, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, errors.New("response is empty: want a CredentialProviderResponse on stdout")
		}
		if syntax, offset := sigsjson.SyntaxErrorOffset(err); syntax {
			return nil, fmt.Errorf("response is not a CredentialProviderResponse: syntax error at byte %d", offset)
		}
		// The decoder's other errors quote the value (a number, or the
		// string of a bad cacheDuration): say what each field must be.
		return nil, errors.New("response is not a CredentialProviderResponse: a field has the wrong type (want strings for apiVersion, kind, cacheKeyType, username and password, a duration such as 5m for cacheDuration, a mapping for auth)")
	}
	if len(strict) > 0 {
		msgs := make([]string, 0, len(strict))
		for _, e := range strict {
			msgs = append(msgs, e.Error())
		}
		sort.Strings(msgs)
		return nil, fmt.Errorf("response is not a CredentialProviderResponse: %s", strings.Join(msgs, "; "))
	}
	if resp.Kind != "CredentialProviderResponse" {
		return nil, fmt.Errorf("response kind is %s, want CredentialProviderResponse", short(resp.Kind))
	}
	if resp.APIVersion != apiVersion {
		return nil, fmt.Errorf("response apiVersion is %s, want %s, the request's", short(resp.APIVersion), apiVersion)
	}
	switch resp.CacheKeyType {
	case credentialproviderv1.ImagePluginCacheKeyType, credentialproviderv1.RegistryPluginCacheKeyType, credentialproviderv1.GlobalPluginCacheKeyType:
	default:
		return nil, fmt.Errorf("response cacheKeyType is %s, want Image, Registry or Global", short(string(resp.CacheKeyType)))
	}
	if resp.CacheDuration != nil && resp.CacheDuration.Duration < 0 {
		resp.CacheDuration.Duration = 0
	}
	for pattern := range resp.Auth {
		if _, err := url.Parse("https://" + pattern); err != nil || pattern == "" {
			return nil, fmt.Errorf("response auth key %s is not a registry pattern", short(pattern))
		}
	}
	return &resp, nil
}

// short quotes a protocol value of a response for an error, cut to a
// length that fits one.
func short(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return fmt.Sprintf("%q", s)
}
