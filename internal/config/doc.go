// Package config is `berth run`'s settings: the Settings type and its
// defaults (the kubelet's where berth shares a setting), the flags bound
// with pflag under the kubelet's names, berth's own config file and a
// kubelet KubeletConfiguration (read beneath the flags, each error naming
// the file, line and field), validation with every problem named, and
// the conversion of the settings into each component's options
// (source.Config, kuberuntime.Options, syncloop.Config, ...).
//
// It owns those names, defaults and error texts. It must never import
// internal/daemon or internal/cli, and never starts a component: it
// builds options only. Its mutable state is the Settings a caller holds
// (each call works on its own copy) and the warnings of the config files
// read so far (configWarnings), written by the reads and taken by the
// daemon's logger once it exists, both in the one goroutine that starts
// berth.
package config
