// Package pullauth reads registry credentials and matches them to images:
// the formats an image pull Secret or a node's credentials file holds them
// in (.dockerconfigjson, config.json, the legacy .dockercfg), parsed
// without ever quoting a password in an error, and a Keyring that finds
// the credentials for a repository as the kubelet's does.
//
// It is a leaf: it must never import another berth package; finding and
// reading the files, and which Secrets a pod may use, are the runtime
// manager's.
//
// It owns no mutable state: a Keyring belongs to whoever built it and is
// not safe for concurrent writes.
package pullauth
