package api

import (
	"net/http"
)

// node serves the node controller's state (GET /node) on the socket only:
// it names the API server berth talks to, which is not every local user's
// business. Without --kubeconfig berth joins no cluster and answers 404.
func (api *Server) node(w http.ResponseWriter, r *http.Request) {
	if overTCP(r) {
		http.Error(w, "/node is served on berth's unix socket only (--socket; `berth node` uses it): it names the cluster's API server", http.StatusForbidden)
		return
	}
	if api.nodeState == nil {
		http.Error(w, "berth joins no cluster: it runs without --kubeconfig (see docs/joining-a-cluster.md)", http.StatusNotFound)
		return
	}
	writeJSON(w, api.nodeState())
}
