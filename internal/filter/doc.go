// Package filter compiles and evaluates RocketMQ's SQL92 message selectors
// (MessageSelector{Type: SQL92}), the expressions a consumer group
// subscribes with to receive only the messages whose properties match.
//
// # Language
//
// As RocketMQ's broker parses it (filter/parser/SelectorParser.jj):
//
//	expr       := and { OR and }
//	and        := equality { AND equality }
//	equality   := comparison { ("=" | "<>") comparison | IS [NOT] NULL }
//	comparison := unary { (">" | ">=" | "<" | "<=") unary
//	                    | [NOT] BETWEEN unary AND unary
//	                    | [NOT] IN "(" string { "," string } ")"
//	                    | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string }
//	unary      := "+" unary | "-" unary | NOT unary | primary
//	primary    := literal | identifier | "(" expr ")"
//
// Keywords are case-insensitive. Literals: 'string' (a doubled quote is a quote),
// decimal integers with an optional L suffix (int64), decimals with an
// optional exponent (float64), TRUE, FALSE. NULL appears only in IS [NOT]
// NULL. Identifiers are [a-zA-Z_$][a-zA-Z0-9_$]* and name message
// properties, user or system (TAGS, KEYS, ...). NOT is unary, as in
// RocketMQ: write NOT (a = 'x'); "NOT a = 'x'" is refused here (RocketMQ
// reads it as (NOT a) = 'x', which never matches).
//
// # Semantics
//
// A property's value is a string. Compared with a constant it is converted
// to the constant's type: to int64 for an integer (Java's Long.valueOf),
// to float64 for a decimal (Double.valueOf), to a boolean for TRUE or FALSE
// (true when it equals "true" ignoring case). A property compared with a
// property compares as strings for = and <>, as numbers for the others. An
// integer meets a decimal as float64; float64 compares as Java's
// Double.compareTo (NaN above everything, -0 below 0).
//
// A missing property is NULL. A comparison with NULL is NULL, AND, OR and
// NOT follow SQL's three-valued logic (evaluated left to right, as
// RocketMQ, stopping when the left side decides), and a message matches
// only when the whole expression is TRUE. A value that cannot be converted
// (amount > 5 with amount = "abc") is an evaluation error, and a message
// whose evaluation fails does not match, whatever the rest of the
// expression says (RocketMQ throws).
//
// Differences from RocketMQ, all in expressions RocketMQ evaluates
// surprisingly: 'x' = a with a missing is NULL here (RocketMQ: FALSE, so
// NOT ('x' = a) matched); a = b with both missing is NULL (RocketMQ: TRUE).
//
// Checked when compiling, as RocketMQ does: >, >=, <, <= and BETWEEN need
// numeric constants (or properties); NULL cannot be compared with = or <>;
// BETWEEN's bounds must be in order; IN lists strings only; a boolean
// constant is compared only with booleans; the whole expression and the
// operands of AND, OR and NOT are conditions (a bare property counts: it is
// FALSE when present, NULL when missing, as RocketMQ's boolean cast).
//
// # Cost
//
// Compile once per subscription version; Expr is immutable and safe for
// concurrent use. Match does not allocate: properties are looked up lazily,
// each at most once per message, and compared as bytes. Expressions come
// from consumers, so Compile bounds what one can cost: at most MaxLen
// bytes, MaxNesting levels of parentheses, NOT and signs, and a tree at
// most MaxHeight levels tall (evaluation recurses once per level).
package filter
