/*
Copyright 2026 The fleet-controller Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package retirement

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidNumber is wrapped by every error CanonicalNumber returns.
var ErrInvalidNumber = errors.New("invalid number")

// maxExponentMagnitude bounds the decimal exponent of a Number's canonical
// (scientific) form. It is far beyond anything a TTL needs and keeps
// canonical forms short. maxExponentLiteral bounds the exponent written in
// the input, which may legitimately be larger ("100e999999" is 1e+1000001's
// neighbour) but must not overflow while being parsed.
const (
	maxExponentMagnitude = 1_000_000
	maxExponentLiteral   = 1_000_000_000
)

// Number is a decimal number kept as text, the way it was stored (for
// example a TTL that went through a float column as "900.0"). Two Numbers
// with the same value have the same canonical form: 900, 900.0, 9e2,
// "900" (quoted) and 0900 all canonicalise to "900". NaN, infinities and
// anything that is not a plain decimal literal are invalid; they never panic,
// they simply fail validation.
type Number string

// NumberFromInt returns the Number for an integer.
func NumberFromInt(i int64) Number { return Number(strconv.FormatInt(i, 10)) }

// NumberFromFloat returns the Number for a float. NaN and ±Inf produce a
// Number that is invalid (Canonical returns an error).
func NumberFromFloat(f float64) Number { return Number(strconv.FormatFloat(f, 'g', -1, 64)) }

// Canonical returns the canonical text of n, or an error wrapping
// ErrInvalidNumber.
func (n Number) Canonical() (string, error) { return CanonicalNumber(string(n)) }

// Positive reports whether n is a valid number strictly greater than zero.
func (n Number) Positive() bool {
	c, err := n.Canonical()
	return err == nil && c != "0" && c[0] != '-'
}

// Duration interprets n as a number of seconds. Values beyond the range of
// time.Duration saturate at its limits; an invalid Number returns an error.
func (n Number) Duration() (time.Duration, error) {
	c, err := n.Canonical()
	if err != nil {
		return 0, err
	}
	return secondsToDuration(c), nil
}

// SecondsDuration is seconds as a Duration, saturating at the limits of time.Duration
// (about ±292 years) instead of wrapping around. It is the one conversion of a heartbeat
// TTL: the schema bounds heartbeatTTLSeconds far below the limit, but a row stored before
// that bound, or written where the schema is not enforced, may carry more, and a TTL that
// wrapped to a small or negative value would turn a live worker stale. A non-positive
// TTL never keeps a heartbeat fresh (fleet.Classify).
func SecondsDuration(seconds int64) time.Duration {
	switch {
	case seconds > math.MaxInt64/int64(time.Second):
		return time.Duration(math.MaxInt64)
	case seconds < math.MinInt64/int64(time.Second):
		return time.Duration(math.MinInt64)
	}
	return time.Duration(seconds) * time.Second
}

// secondsToDuration converts a canonical decimal (always valid float syntax)
// into a saturating duration.
func secondsToDuration(canonical string) time.Duration {
	if i, err := strconv.ParseInt(canonical, 10, 64); err == nil {
		return SecondsDuration(i)
	}
	// A range error still yields ±Inf or ±0, both handled below.
	f, _ := strconv.ParseFloat(canonical, 64)
	ns := f * float64(time.Second)
	switch {
	case math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return time.Duration(math.MaxInt64)
	case ns <= math.MinInt64:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(ns)
}

// CanonicalNumber returns the canonical text of a decimal literal.
//
// Accepted input: optional surrounding whitespace, optionally one pair of
// double quotes around the literal, an optional sign, digits with at most
// one decimal point (at least one digit overall), and an optional exponent
// (e or E, optional sign, digits). Everything else is rejected, notably NaN,
// Inf, hexadecimal and empty text.
//
// The canonical form depends only on the value: leading and trailing zeros
// are dropped, zero is "0" (never "-0"), integers up to 21 digits are
// written out in full, small fractions as "0.xxx", and the rest in
// scientific notation "d.ddde±x".
func CanonicalNumber(s string) (string, error) {
	t := strings.TrimSpace(s)
	if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
		t = strings.TrimSpace(t[1 : len(t)-1])
	}
	if fastCanonicalInt(t) {
		return t, nil
	}
	// "900.0", "900.000": a canonical integer followed by a zero fraction.
	if dot := strings.IndexByte(t, '.'); dot > 0 && fastCanonicalInt(t[:dot]) && allZeros(t[dot+1:]) {
		return t[:dot], nil
	}
	neg, digits, exp, err := parseDecimal(t)
	if err != nil {
		return "", fmt.Errorf("%w: %q %s", ErrInvalidNumber, s, err.Error())
	}
	// value = digits × 10^exp; drop leading and trailing zeros.
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	digits = trimmed
	if digits == "" {
		return "0", nil
	}
	point := len(digits) + exp // digits before the decimal point
	if e := point - 1; e > maxExponentMagnitude || e < -maxExponentMagnitude {
		return "", fmt.Errorf("%w: %q is out of range", ErrInvalidNumber, s)
	}
	return formatDecimal(neg, digits, exp), nil
}

// parseDecimal splits a literal into its sign, its digits (integer and fraction part
// together) and the exponent that scales them: value = digits × 10^exp. The error text
// completes "<literal> …".
func parseDecimal(t string) (neg bool, digits string, exp int, err error) {
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		neg = t[i] == '-'
		i++
	}
	intStart := i
	for i < len(t) && isDigit(t[i]) {
		i++
	}
	intPart := t[intStart:i]
	fracPart := ""
	if i < len(t) && t[i] == '.' {
		i++
		fs := i
		for i < len(t) && isDigit(t[i]) {
			i++
		}
		fracPart = t[fs:i]
	}
	if intPart == "" && fracPart == "" {
		return false, "", 0, errors.New("has no digits")
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		var n int
		if exp, n, err = parseExponent(t[i+1:]); err != nil {
			return false, "", 0, err
		}
		i += 1 + n
	}
	if i != len(t) {
		return false, "", 0, errors.New("has unexpected text")
	}
	return neg, intPart + fracPart, exp - len(fracPart), nil
}

// parseExponent reads an exponent (optional sign, digits) at the start of t and returns
// its value and how many bytes it took.
func parseExponent(t string) (exp, n int, err error) {
	expNeg := false
	if n < len(t) && (t[n] == '+' || t[n] == '-') {
		expNeg = t[n] == '-'
		n++
	}
	start := n
	for n < len(t) && isDigit(t[n]) {
		if exp > maxExponentLiteral {
			return 0, 0, errors.New("has an exponent out of range")
		}
		exp = exp*10 + int(t[n]-'0')
		n++
	}
	if n == start {
		return 0, 0, errors.New("has an empty exponent")
	}
	if expNeg {
		exp = -exp
	}
	return exp, n, nil
}

// formatDecimal writes digits × 10^exp (digits without leading or trailing zeros): in
// full up to 21 integer digits, as "0.xxx" for small fractions, else as "d.ddde±x".
func formatDecimal(neg bool, digits string, exp int) string {
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	k := len(digits)
	point := k + exp
	switch {
	case exp >= 0 && point <= 21:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", exp))
	case exp < 0 && point > 0:
		b.WriteString(digits[:point])
		b.WriteByte('.')
		b.WriteString(digits[point:])
	case exp < 0 && point > -6:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -point))
		b.WriteString(digits)
	default:
		b.WriteByte(digits[0])
		if k > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('e')
		e := point - 1
		if e >= 0 {
			b.WriteByte('+')
		}
		b.WriteString(strconv.Itoa(e))
	}
	return b.String()
}

// fastCanonicalInt reports whether t is already canonical: a non-zero
// integer of at most 21 digits without sign or leading zero, or "0".
func fastCanonicalInt(t string) bool {
	if t == "0" {
		return true
	}
	if len(t) == 0 || len(t) > 21 || t[0] == '0' {
		return false
	}
	for i := 0; i < len(t); i++ {
		if !isDigit(t[i]) {
			return false
		}
	}
	return true
}

// allZeros reports whether s consists of '0' characters only ("" included).
func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
