package jma

// Class is a JMA seismic intensity class (震度階級). Its integer value is the
// 0–9 level index of shindo's real-time snapshots: 0, 1, 2, 3, 4, 5-, 5+, 6-,
// 6+, 7 in that order.
type Class int

// The ten classes.
const (
	Class0 Class = iota
	Class1
	Class2
	Class3
	Class4
	Class5Lower // 5-
	Class5Upper // 5+
	Class6Lower // 6-
	Class6Upper // 6+
	Class7
)

var classNames = [...]string{"0", "1", "2", "3", "4", "5-", "5+", "6-", "6+", "7"}

// String is the class as JMA writes it: "0" … "4", "5-", "5+", "6-", "6+", "7".
func (c Class) String() string {
	if c < Class0 || c > Class7 {
		return "?"
	}
	return classNames[c]
}

// Level is the 0–9 index used by real-time snapshots.
func (c Class) Level() int { return int(c) }

// ClassOf returns the class of an unrounded instrumental intensity, taken from
// its reported value: <0.5 → 0, 0.5–1.4 → 1, 1.5–2.4 → 2, 2.5–3.4 → 3,
// 3.5–4.4 → 4, 4.5–4.9 → 5-, 5.0–5.4 → 5+, 5.5–5.9 → 6-, 6.0–6.4 → 6+,
// ≥6.5 → 7.
func ClassOf(i float64) Class {
	// Work in integer tenths of the reported value so the boundaries are exact.
	t := tenths(i)
	switch {
	case t < 5:
		return Class0
	case t < 15:
		return Class1
	case t < 25:
		return Class2
	case t < 35:
		return Class3
	case t < 45:
		return Class4
	case t < 50:
		return Class5Lower
	case t < 55:
		return Class5Upper
	case t < 60:
		return Class6Lower
	case t < 65:
		return Class6Upper
	default:
		return Class7
	}
}

// ParseClass parses the JMA spelling of a class ("5-", "6+", …).
func ParseClass(s string) (Class, bool) {
	for i, name := range classNames {
		if name == s {
			return Class(i), true
		}
	}
	return 0, false
}
