// Package podrules holds the rules a Pod must meet on berth: the API
// defaults (Default), the API server's validation of a pod (Validate) with
// berth's own annotations, restart rules, stop signals and the like, and
// what a standalone node cannot honour (CheckStandalone), together with the
// registry of every pod field and how berth treats it (FieldsTable, the
// table of docs/pod-fields.md; IgnoredFields, the warnings for the set
// fields berth accepts and ignores), and the host ports a pod claims on
// its node (HostPorts, for the clashes between pods).
//
// It works on decoded *v1.Pod objects and returns field.ErrorList; turning
// those into Problems with a file and line is package podspec's job. It
// must never import another berth package.
//
// It has no mutable state: its tables are fixed at start.
package podrules
