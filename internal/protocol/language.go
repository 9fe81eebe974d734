package protocol

import "strconv"

// LanguageCode says which client library sent a command (spec §1.2). The
// JSON and msgpack headers carry its name ("GO"), the ROCKETMQ binary
// header carries the byte.
type LanguageCode uint8

// Language codes, RocketMQ's LanguageCode ordinals.
const (
	LanguageJava   LanguageCode = 0
	LanguageCPP    LanguageCode = 1
	LanguageDotNet LanguageCode = 2
	LanguagePython LanguageCode = 3
	LanguageDelphi LanguageCode = 4
	LanguageErlang LanguageCode = 5
	LanguageRuby   LanguageCode = 6
	LanguageOther  LanguageCode = 7
	LanguageHTTP   LanguageCode = 8
	LanguageGo     LanguageCode = 9
	LanguagePHP    LanguageCode = 10
	LanguageOMS    LanguageCode = 11
	LanguageRust   LanguageCode = 12
	LanguageNodeJS LanguageCode = 13 // 5.x
)

var languageNames = [...]string{
	LanguageJava:   "JAVA",
	LanguageCPP:    "CPP",
	LanguageDotNet: "DOTNET",
	LanguagePython: "PYTHON",
	LanguageDelphi: "DELPHI",
	LanguageErlang: "ERLANG",
	LanguageRuby:   "RUBY",
	LanguageOther:  "OTHER",
	LanguageHTTP:   "HTTP",
	LanguageGo:     "GO",
	LanguagePHP:    "PHP",
	LanguageOMS:    "OMS",
	LanguageRust:   "RUST",
	LanguageNodeJS: "NODE_JS",
}

// Valid reports whether l is one of the codes above.
func (l LanguageCode) Valid() bool { return int(l) < len(languageNames) }

// String returns the wire name ("GO"), or "LANGUAGE(n)" for an unknown code.
func (l LanguageCode) String() string {
	if l.Valid() {
		return languageNames[l]
	}
	return "LANGUAGE(" + strconv.Itoa(int(l)) + ")"
}

// ParseLanguage maps a wire name to its code. Unknown names give
// LanguageOther and false: the name is informational only, so codecs accept
// any value rather than failing the command (the Go client does the same).
func ParseLanguage(name string) (LanguageCode, bool) {
	// NB: a switch on the common names first; the loop is for the rest.
	switch name {
	case "GO":
		return LanguageGo, true
	case "JAVA":
		return LanguageJava, true
	}
	for i, s := range languageNames {
		if s == name {
			return LanguageCode(i), true
		}
	}
	return LanguageOther, false
}

// Version ordinals (spec §1.7, MQVersion.Version). Commands carry the
// sender's ordinal in the version field.
const (
	// Version3011 (V3_0_11): REGISTER_BROKER bodies from senders at or above
	// it use the RegisterBrokerBody wrapper.
	Version3011 = 37
	// Version349 (V3_4_9): the broker honours maxReconsumeTimes from the
	// send header at or above it.
	Version349 = 121
	// Version410 (V4_1_0).
	Version410 = 233
	// Version452 (V4_5_2) is what the official Go client sends.
	Version452 = 317
	// Version494 (V4_9_4): at or above it the nameserver answers routes in
	// standard JSON.
	Version494 = 401
	// Version498 (V4_9_8) is what a 4.9.8 broker or nameserver puts in its
	// commands, and what Sluice sends.
	Version498 = 409

	// CurrentVersion is the version Sluice puts in the commands it sends.
	CurrentVersion = Version498
)

// VersionName names a MQVersion ordinal RocketMQ's way ("V4_9_8") when it
// is one of those above, and gives the number otherwise.
func VersionName(v int32) string {
	switch v {
	case Version3011:
		return "V3_0_11"
	case Version349:
		return "V3_4_9"
	case Version410:
		return "V4_1_0"
	case Version452:
		return "V4_5_2"
	case Version494:
		return "V4_9_4"
	case Version498:
		return "V4_9_8"
	}
	// NB: from V4_0_0_SNAPSHOT (212) to V5_9_9 (611) every x.y.z has a
	// SNAPSHOT ordinal and the release's (RocketMQ 5 clients' versions).
	if n := int(v) - 212; n >= 0 && n < 400 {
		name := "V" + strconv.Itoa(4+n/200) + "_" + strconv.Itoa(n/20%10) + "_" + strconv.Itoa(n/2%10)
		if n%2 == 0 {
			name += "_SNAPSHOT"
		}
		return name
	}
	return strconv.Itoa(int(v))
}
