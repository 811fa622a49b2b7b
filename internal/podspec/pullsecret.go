package podspec

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// CheckPullSecret reads the registry credentials of a Secret named in
// imagePullSecrets as the runtime manager will at pull time (the pullauth
// package), so a malformed one is a problem at its reference's line
// rather than a failed pull. The API server checks only that the file is
// a JSON object; a pod referencing a Secret for pulls asks for more.
// Errors name registries and fields, never a credential.
func CheckPullSecret(s *v1.Secret) error {
	var auths map[string]json.RawMessage
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		var file struct {
			Auths map[string]json.RawMessage `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &file); err != nil {
			return fmt.Errorf("%s: %s", v1.DockerConfigJsonKey, redactJSONError(err))
		}
		auths = file.Auths
	case v1.SecretTypeDockercfg:
		if err := json.Unmarshal(s.Data[v1.DockerConfigKey], &auths); err != nil {
			return fmt.Errorf("%s: %s", v1.DockerConfigKey, redactJSONError(err))
		}
	default:
		return fmt.Errorf("type %q holds no registry credentials: an image pull secret must be of type %s or %s",
			s.Type, v1.SecretTypeDockerConfigJson, v1.SecretTypeDockercfg)
	}
	for registry, raw := range auths {
		var e struct {
			Username string `json:"username"`
			Password string `json:"password"`
			Auth     string `json:"auth"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("registry %q: %s", registry, redactJSONError(err))
		}
		if e.Auth == "" {
			continue
		}
		decoded, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil || !strings.Contains(string(decoded), ":") {
			return fmt.Errorf("registry %q: auth must be base64(username:password)", registry)
		}
	}
	return nil
}
