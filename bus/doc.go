// Package bus is flock's bus server: the embedded nats-server `flockctl
// serve` runs (server.go), with the streams that keep tasks, results and
// dead letters (streams.go, dead.go), the task desk that hands workers
// their tasks under a lease (desk.go, lease.go, released.go), its log and
// the ledger of violations (log.go, limit.go, violations.go), and the
// answers to the operator's requests (self.go, units.go, permissions.go); the config provision writes for it and the
// grants in it (config.go, grants.go); and Host, the planner's boundary
// to it: the config file, the seeds (package creds) and the running
// server's reload (host.go).
//
// What it is not: the protocol agents and flockctl speak on it is package
// wire, the operator's client (send, wait, list tasks) package operator,
// the seeds package creds. None of them imports this one.
package bus
