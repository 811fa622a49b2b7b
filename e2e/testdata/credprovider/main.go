// Command credprovider is the image credential provider plugin of the
// end-to-end tests (e2e/credprovider_e2e_test.go): it speaks the kubelet's
// exec protocol, credentialprovider.kubelet.k8s.io/v1, and answers as the
// file named by $MODE_FILE says at each run:
//
//   - ok: the test bed registry's credentials ($REGISTRY_USER,
//     $REGISTRY_PASSWORD) for the image's registry, cached an hour by
//     registry;
//   - wrong: a wrong password, not cached;
//   - hang: starts a child holding its stdout and waits forever, writing
//     both process IDs to $PIDS_FILE.
//
// Each run appends the requested image to $CALLS_FILE.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

type request struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Image      string `json:"image"`
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail("read the request: %v", err)
	}
	if req.APIVersion != "credentialprovider.kubelet.k8s.io/v1" || req.Kind != "CredentialProviderRequest" || req.Image == "" {
		fail("not a v1 CredentialProviderRequest: %+v", req)
	}
	calls, err := os.OpenFile(os.Getenv("CALLS_FILE"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fail("%v", err)
	}
	fmt.Fprintln(calls, req.Image)
	calls.Close()
	mode, err := os.ReadFile(os.Getenv("MODE_FILE"))
	if err != nil {
		fail("%v", err)
	}
	registry, _, _ := strings.Cut(req.Image, "/")
	password, duration := os.Getenv("REGISTRY_PASSWORD"), "1h"
	switch strings.TrimSpace(string(mode)) {
	case "ok":
	case "wrong":
		password, duration = "not-the-password", "0s"
	case "hang":
		child := exec.Command("sleep", "3600")
		child.Stdout = os.Stdout
		if err := child.Start(); err != nil {
			fail("%v", err)
		}
		pids := fmt.Sprintf("%d %d\n", os.Getpid(), child.Process.Pid)
		if err := os.WriteFile(os.Getenv("PIDS_FILE"), []byte(pids), 0o600); err != nil {
			fail("%v", err)
		}
		_ = child.Wait()
		fail("the child exited")
	default:
		fail("unknown mode %q", mode)
	}
	resp := map[string]any{
		"apiVersion":    req.APIVersion,
		"kind":          "CredentialProviderResponse",
		"cacheKeyType":  "Registry",
		"cacheDuration": duration,
		"auth":          map[string]any{registry: map[string]string{"username": os.Getenv("REGISTRY_USER"), "password": password}},
	}
	if err := json.NewEncoder(os.Stdout).Encode(resp); err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
