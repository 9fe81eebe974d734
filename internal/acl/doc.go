// Package acl is Sluice's access control, wire-compatible with RocketMQ
// 4.x's ACL 1.0 (what the official clients send when given credentials;
// spec/rocketmq-ha-acl-filter.md §3).
//
// # Accounts
//
// Rules come from a file in RocketMQ's plain_acl.yml shape (File; LoadFile
// reads it, Compile validates it):
//
//	globalWhiteRemoteAddresses: ["127.0.0.1", "10.1.*.*"]
//	accounts:
//	  - accessKey: alice
//	    secretKey: "12345678"
//	    whiteRemoteAddress: 192.168.1.{1,2}
//	    admin: false
//	    defaultTopicPerm: DENY
//	    defaultGroupPerm: SUB
//	    topicPerms: ["orders=PUB|SUB"]
//	    groupPerms: ["billing=SUB"]
//
// Permissions are DENY, PUB, SUB, PUB|SUB (also SUB|PUB); address patterns
// are *, 192.168.*.*, 10.1.1.1-100, a,b,c and 192.168.1.{1,2} (Pattern).
//
// # Signature
//
// A signed request carries the ext fields AccessKey, Signature and
// optionally SecurityToken. Signature is base64(HMAC-SHA1(secretKey,
// content)), content being the VALUES of the ext fields sorted by key
// (bytewise), concatenated with no separator, followed by the raw body. The
// Java broker signs every received field but Signature (so SecurityToken
// is in); the official Go client leaves SecurityToken out: Verify tries the
// Java way and then, when a token is present, once more without it.
// Comparison is constant-time. Signing and verifying live in package sig
// (clients import it alone).
//
// # Decisions (Checker.Check), in order
//
//  1. A request without AccessKey, with an unknown key, or with a
//     signature that does not verify is refused.
//  2. Whitelists restrict, they never excuse a signature: a non-empty
//     globalWhiteRemoteAddresses must match the peer, and so must the
//     account's whiteRemoteAddress when it is set. (Java lets a whitelisted
//     address skip the signature; Sluice does not.)
//  3. Admin-only codes (topic and subscription-group create/delete, broker
//     config, nameserver topic delete, KV writes, broker registration and
//     write-permission changes, every controller code) need admin: true.
//  4. Resource permissions as the Java broker's PlainAccessValidator reads
//     them from each request code (Resources): an explicit topicPerms or
//     groupPerms entry wins, else the default; any DENY denies; an admin
//     with no lists may do everything. Groups are resources named
//     %RETRY%group, as in Java.
//
// A refusal is NO_PERMISSION (16) with a remark naming the access key, the
// resource and the permission it lacked, never the secret.
//
// # Concurrency
//
// Rules are immutable once compiled. Watcher holds the current *Rules in an
// atomic pointer, swapped by its reload loop when the file changes (a file
// that does not compile keeps the last good rules, and the loop logs why).
package acl
