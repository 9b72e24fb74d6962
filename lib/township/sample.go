package township

import "slices"

// Site is a place for simulated stations: a township's postal code and
// English name and the approximate position of its seat.
type Site struct {
	Code uint32  // three-digit postal code
	Name string  // English name
	Lat  float64 // seat latitude, degrees north
	Lon  float64 // seat longitude, degrees east
}

// Sample returns a spread of 55 townships over Taiwan, Penghu and Kinmen,
// ordered by code, on which the simulated fleet places its stations.
// Positions are township seats rounded to about a kilometre; they place
// simulated stations, nothing more. The list is fixed: the fleet's station
// layout, and the tests built on it, depend on it.
func Sample() []Site {
	return slices.Clone(sample)
}

var sample = []Site{
	{100, "Taipei Zhongzheng", 25.032, 121.519},
	{103, "Taipei Datong", 25.063, 121.513},
	{104, "Taipei Zhongshan", 25.069, 121.533},
	{105, "Taipei Songshan", 25.050, 121.577},
	{106, "Taipei Da'an", 25.026, 121.543},
	{108, "Taipei Wanhua", 25.028, 121.497},
	{110, "Taipei Xinyi", 25.033, 121.567},
	{111, "Taipei Shilin", 25.093, 121.525},
	{112, "Taipei Beitou", 25.132, 121.501},
	{114, "Taipei Neihu", 25.083, 121.589},
	{115, "Taipei Nangang", 25.055, 121.607},
	{116, "Taipei Wenshan", 24.989, 121.570},
	{200, "Keelung Ren'ai", 25.127, 121.740},
	{220, "New Taipei Banqiao", 25.011, 121.459},
	{231, "New Taipei Xindian", 24.967, 121.537},
	{241, "New Taipei Sanchong", 25.062, 121.488},
	{251, "New Taipei Tamsui", 25.169, 121.441},
	{260, "Yilan City", 24.757, 121.754},
	{265, "Luodong", 24.677, 121.767},
	{270, "Su'ao", 24.596, 121.842},
	{300, "Hsinchu City", 24.804, 120.969},
	{302, "Zhubei", 24.838, 121.004},
	{320, "Taoyuan Zhongli", 24.965, 121.225},
	{330, "Taoyuan District", 24.993, 121.301},
	{360, "Miaoli City", 24.560, 120.821},
	{400, "Taichung Central", 24.142, 120.679},
	{420, "Taichung Fengyuan", 24.252, 120.718},
	{433, "Taichung Shalu", 24.233, 120.567},
	{500, "Changhua City", 24.081, 120.538},
	{510, "Yuanlin", 23.961, 120.574},
	{540, "Nantou City", 23.916, 120.686},
	{545, "Puli", 23.966, 120.967},
	{600, "Chiayi City", 23.480, 120.449},
	{612, "Taibao", 23.459, 120.333},
	{640, "Douliu", 23.709, 120.543},
	{700, "Tainan West Central", 22.992, 120.199},
	{710, "Tainan Yongkang", 23.026, 120.257},
	{730, "Tainan Xinying", 23.310, 120.316},
	{800, "Kaohsiung Xinxing", 22.631, 120.310},
	{820, "Kaohsiung Gangshan", 22.797, 120.296},
	{830, "Kaohsiung Fengshan", 22.627, 120.359},
	{880, "Magong", 23.566, 119.579},
	{893, "Kinmen Jincheng", 24.432, 118.318},
	{900, "Pingtung City", 22.669, 120.487},
	{920, "Chaozhou", 22.550, 120.537},
	{946, "Hengchun", 22.002, 120.744},
	{950, "Taitung City", 22.756, 121.144},
	{958, "Chishang", 23.098, 121.218},
	{970, "Hualien City", 23.991, 121.611},
	{971, "Xincheng", 24.128, 121.640},
	{973, "Ji'an", 23.961, 121.568},
	{974, "Shoufeng", 23.860, 121.506},
	{975, "Fenglin", 23.744, 121.452},
	{978, "Ruisui", 23.497, 121.376},
	{981, "Yuli", 23.335, 121.313},
}
