// Package testenv starts the real services the tests talk to, in process and
// on loopback addresses only, so tests need nothing installed and mock
// neither NATS nor S3:
//
//   - NewNATS, NewNATSWithUsers: an embedded JetStream server (the same
//     natsserver that `serve` embeds), optionally with the documented NATS
//     users and permissions (NATSUsersFromDoc);
//   - NewCluster: a three-node JetStream cluster whose nodes can be stopped
//     and restarted, for fail-over tests;
//   - NewS3: an in-process S3 server reached through the real AWS SDK, with
//     a ready client and backends on its buckets;
//   - NewFreezableProxy: a TCP proxy that can stop answering, for timeout
//     tests;
//   - NewTLSFiles: a throwaway CA, server and client certificates.
//
// Everything a constructor starts is stopped when its test ends.
package testenv
