// Package config is `berth run`'s settings: the Settings type and its
// defaults (the kubelet's where berth shares a setting), the flags bound
// with pflag under the kubelet's names, berth's own versioned config file
// (apiVersion berth.io/v1alpha1, kind BerthConfiguration; file.go decodes
// it field by field from the YAML node tree, so every problem is reported
// at once as FILE:LINE: field: message, and reads older field names with
// a warning), a kubelet KubeletConfiguration (read beneath the flags),
// the kubelet's CredentialProviderConfig of the image credential provider
// plugins (credprovider.go), validation with every problem named (with
// its file and line when a file set it), the redacted versioned form
// berth config view prints, and the conversion of the settings into
// each component's options (source.Config, kuberuntime.Options,
// syncloop.Config, ...).
//
// It owns those names, defaults and error texts. It must never import
// internal/daemon or internal/cli, and never starts a component: it
// builds options only. It keeps no mutable state of its own: the
// Settings belong to their caller (each call works on its own copy), and
// the config files' warnings are returned with them (Resolve), for the
// daemon to log once its logger exists or for berth config to print.
package config
