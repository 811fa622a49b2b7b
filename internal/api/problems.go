package api

import (
	"net/http"

	"github.com/berth-agent/berth/internal/podspec"
)

// problem is one manifest problem as the API serves it.
type problem struct {
	Source    string `json:"source"`
	Origin    string `json:"origin"`
	Line      int    `json:"line,omitempty"`
	Field     string `json:"field,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// Error is the whole problem as berth logs it: FILE:LINE: FIELD: MESSAGE.
	Error string `json:"error"`
}

// problemList is the answer of /problems.
type problemList struct {
	Items []problem `json:"items"`
}

// problems serves every current manifest problem of every source. /pods
// shows a refused manifest as a pod when it got as far as a name; this
// also lists the ones that did not (a YAML syntax error, an unreadable
// file, an unreachable URL) and the broken edits of manifests whose last
// good version keeps running, which an operator would otherwise only see
// in the log; and the versions that failed on trial (package rollback).
func (api *Server) problems(w http.ResponseWriter, _ *http.Request) {
	list := problemList{Items: []problem{}}
	for _, p := range api.view.Problems() {
		list.Items = append(list.Items, fromManifestProblem(p))
	}
	writeJSON(w, list)
}

func fromManifestProblem(p podspec.Problem) problem {
	return problem{
		Source: p.Source, Origin: p.Origin, Line: p.Line, Field: p.Field, Reason: p.Reason,
		Message: p.Message, Name: p.Name, Namespace: p.Namespace, Error: p.Error(),
	}
}
