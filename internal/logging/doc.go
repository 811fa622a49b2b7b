// Package logging builds berth's one *slog.Logger: records go to the
// systemd journal with their own priority and fields when stderr is the
// journal's stream (the service runs under systemd), and to stderr as
// logfmt text or JSON lines otherwise.
//
// It owns the choice of output and the mapping of slog records onto
// journal entries. It must never import another package of berth: every
// package receives the logger it builds, none reaches back for it. It holds
// no mutable state beyond each handler's attributes, which are immutable
// once the handler is made (WithAttrs and WithGroup return new handlers).
package logging
