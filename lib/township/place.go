package township

import (
	"math"
	"strconv"
)

// nearShoreKm is how far from land an epicentre is named after the
// nearest county (宜蘭縣近海) rather than a sea area.
const nearShoreKm = 100

// unknown names a position that is not a coordinate.
const unknown = "未知地點"

// centre is roughly the centroid of Taiwan's main island, from which sea
// areas are named by bearing.
var centre = struct{ lat, lon float64 }{23.7, 120.96}

// seaAreas name the sea beyond nearShoreKm of land by the bearing from
// centre, in sectors of 45° centred on north, north-east, …, north-west:
// the Taiwan Strait takes the west and north-west, the south-west sea the
// south as well, as the Bashi Channel and the sea off Hengchun lie
// south-west of the centre.
var seaAreas = [8]string{
	"臺灣北部海域",  // N
	"臺灣東北部海域", // NE
	"臺灣東部海域",  // E
	"臺灣東南部海域", // SE
	"臺灣西南部海域", // S
	"臺灣西南部海域", // SW
	"臺灣海峽",    // W
	"臺灣海峽",    // NW
}

// Place names a position for an early warning: the county and township it
// lies in (花蓮縣壽豐鄉; the city alone for 300 新竹市 and 600 嘉義市); at sea
// within 100 km of land, the nearest county and 近海 (臺東縣近海); farther
// out, a sea area by the bearing from the middle of Taiwan (臺灣北部海域,
// 臺灣東北部海域, 臺灣東部海域, 臺灣東南部海域, 臺灣西南部海域 to the south and
// south-west, 臺灣海峽 to the west and north-west). The sea areas are meant
// for Taiwan's region: a position on the far side of the world still gets
// one. A position that is not a coordinate is 未知地點.
func Place(lat, lon float64) string {
	t, km := Nearest(lat, lon)
	switch {
	case math.IsInf(km, 1):
		return unknown
	case km == 0 && t.Name == t.County:
		return t.County
	case km == 0:
		return t.County + t.Name
	case km <= nearShoreKm:
		return t.County + "近海"
	}
	lat, lon, _ = coordinate(lat, lon)
	b := bearing(centre.lat, centre.lon, lat, lon)
	return seaAreas[int((b+22.5)/45)%8]
}

// compass are the 16 points of the compass in Chinese, from north
// clockwise.
var compass = [16]string{
	"北", "北北東", "東北", "東北東", "東", "東南東", "東南", "南南東",
	"南", "南南西", "西南", "西南西", "西", "西北西", "西北", "北北西",
}

// ReportLocation names an epicentre as the Central Weather
// Administration's earthquake reports do: from the nearest county or city
// government seat, the bearing on 16 points of the compass, the
// great-circle distance in kilometres with one decimal, and in parentheses
// 位於 and the Place:
//
//	花蓮縣政府南南西方 11.4 公里 (位於花蓮縣壽豐鄉)
//	臺東縣政府東北方 17.5 公里 (位於臺東縣近海)
//
// with ASCII parentheses and single spaces, so that the place can be taken
// out with /位於(.+?)(?=\))/. A position that is not a coordinate is
// 未知地點 (位於未知地點).
func ReportLocation(lat, lon float64) string {
	lat, lon, ok := coordinate(lat, lon)
	if !ok {
		return unknown + " (位於" + unknown + ")"
	}
	s, km := seats[0], math.Inf(1)
	for _, c := range seats {
		if d := distanceKm(c.lat, c.lon, lat, lon); d < km {
			s, km = c, d
		}
	}
	b := bearing(s.lat, s.lon, lat, lon)
	return s.name + compass[int((b+11.25)/22.5)%16] + "方 " +
		strconv.FormatFloat(km, 'f', 1, 64) + " 公里 (位於" + Place(lat, lon) + ")"
}

// seat is a county or city government, a reference point of the Central
// Weather Administration's earthquake reports.
type seat struct {
	county string  // county or city, as Township.County
	name   string  // the name the reports use
	town   string  // the township it stands in (checked by the tests)
	lat    float64 // degrees north
	lon    float64 // degrees east
}

// seats are the 22 county and city governments, placed by hand from their
// street addresses (in the comments) to within about 200 m; the tests
// check that each lies in its township.
var seats = []seat{
	{"臺北市", "臺北市政府", "信義區", 25.0375, 121.5637}, // 市府路1號
	{"新北市", "新北市政府", "板橋區", 25.0122, 121.4654}, // 中山路一段161號
	{"基隆市", "基隆市政府", "中正區", 25.1316, 121.7441}, // 義一路1號
	{"桃園市", "桃園市政府", "桃園區", 24.9926, 121.3011}, // 縣府路1號
	{"新竹市", "新竹市政府", "新竹市", 24.8066, 120.9689}, // 北區中正路120號
	{"新竹縣", "新竹縣政府", "竹北市", 24.8268, 121.0128}, // 光明六路10號
	{"苗栗縣", "苗栗縣政府", "苗栗市", 24.5653, 120.8206}, // 府前路1號
	{"臺中市", "臺中市政府", "西屯區", 24.1616, 120.6468}, // 臺灣大道三段99號
	{"彰化縣", "彰化縣政府", "彰化市", 24.0760, 120.5446}, // 中山路二段416號
	{"南投縣", "南投縣政府", "南投市", 23.9024, 120.6905}, // 中興路660號
	{"雲林縣", "雲林縣政府", "斗六市", 23.6992, 120.5262}, // 雲林路二段515號
	{"嘉義市", "嘉義市政府", "嘉義市", 23.4813, 120.4536}, // 東區中山路199號
	{"嘉義縣", "嘉義縣政府", "太保市", 23.4587, 120.2925}, // 祥和一路東段1號
	{"臺南市", "臺南市政府", "安平區", 22.9921, 120.1849}, // 永華路二段6號
	{"高雄市", "高雄市政府", "苓雅區", 22.6209, 120.3120}, // 四維三路2號
	{"屏東縣", "屏東縣政府", "屏東市", 22.6832, 120.4880}, // 自由路527號
	{"宜蘭縣", "宜蘭縣政府", "宜蘭市", 24.7302, 121.7631}, // 縣政北路1號
	{"花蓮縣", "花蓮縣政府", "花蓮市", 23.9914, 121.6196}, // 府前路17號
	{"臺東縣", "臺東縣政府", "臺東市", 22.7556, 121.1504}, // 中山路276號
	{"澎湖縣", "澎湖縣政府", "馬公市", 23.5656, 119.5664}, // 治平路32號
	{"金門縣", "金門縣政府", "金城鎮", 24.4370, 118.3185}, // 民生路60號
	{"連江縣", "連江縣政府", "南竿鄉", 26.1581, 119.9515}, // 介壽村76號
}
