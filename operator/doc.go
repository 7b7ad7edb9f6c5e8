// Package operator is the operator's client of the bus (flockctl's): hand
// a task to the flock, wait for its result, list the tasks the bus holds,
// ask every host's bus for its units. It speaks wire and JetStream over a
// connection made as the operator (bus.System.Operator); agents may not
// read the streams. It needs nothing of the server.
package operator
