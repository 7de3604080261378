package feeds

// The synthetic universe, most liquid first. Prices are realistic levels
// the synthetic paths wander around; they are parsed once per provider
// (no package-level state).

// syntheticCrypto lists crypto base assets and a USD price level, by
// market-cap rank.
const syntheticCrypto = `
BTC 97000, ETH 3400, XRP 2.3, BNB 900, SOL 180, DOGE 0.2, TRX 0.29, ADA 0.7, LINK 18,
AVAX 25, XLM 0.3, SUI 3.2, HBAR 0.2, BCH 500, TON 3.0, LTC 100, SHIB 0.000013, DOT 4.0,
UNI 8, PEPE 0.00001, AAVE 260, NEAR 2.8, APT 5, ICP 5.5, ETC 18, ONDO 0.9, TAO 400,
POL 0.23, ARB 0.4, VET 0.025, RENDER 4, FIL 2.6, ALGO 0.23, ATOM 4.5, OP 0.7, TIA 2.0,
INJ 13, STX 0.7, IMX 0.6, GRT 0.09, SEI 0.3, WLD 1.2, JUP 0.5, FET 0.6, BONK 0.000022,
LDO 1.2, QNT 100, ENA 0.6, FLOKI 0.00009, WIF 0.8, PYTH 0.13, XTZ 0.7, EOS 0.5,
THETA 0.9, SAND 0.27, MANA 0.3, AXS 2.5, GALA 0.015, FLOW 0.4, EGLD 15, CRV 0.7,
RUNE 1.3, SNX 0.7, CHZ 0.04, KAIA 0.15, NEO 6, IOTA 0.18, JASMY 0.013, PENDLE 4, ORDI 9,
AR 7, CFX 0.13, MINA 0.25, ZEC 250, DYDX 0.6, COMP 45, 1INCH 0.25, ENS 20, ROSE 0.03,
ZIL 0.012, KAVA 0.35, CAKE 2.5, GMX 14, BAT 0.17, DASH 45, ZRX 0.25, CELO 0.3, RVN 0.012,
ANKR 0.017, YFI 5500, SUSHI 0.7, QTUM 2.3, WOO 0.08, LRC 0.09, KSM 15, GLM 0.25,
ICX 0.12, ONE 0.012, IOTX 0.025, SKL 0.025, BAND 0.6, STORJ 0.25, SXP 0.17, ONT 0.12,
AUDIO 0.06, CELR 0.007, HOT 0.001, SC 0.003, DGB 0.008, RSR 0.006, CTSI 0.07, API3 0.8,
ACH 0.02, MASK 1.1, ID 0.15, ARKM 0.45, BLUR 0.09, MAGIC 0.15, SSV 7, LQTY 0.9, GMT 0.04,
APE 0.5, JTO 1.6, STRK 0.13, MANTA 0.25, ALT 0.03, PIXEL 0.02, DYM 0.3, ZK 0.06, ZRO 1.9,
NOT 0.0017, IO 0.6, BOME 0.0015, ETHFI 1.0, W 0.07, BB 0.1, TNSR 0.15, SAGA 0.25,
AEVO 0.08, OMNI 3, XAI 0.04, ACE 0.5, AI 0.12, MEME 0.002, ORCA 2.2, EIGEN 1.1, SCR 0.25,
NEIRO 0.0003, TURBO 0.004, PNUT 0.2, ACT 0.05, MOVE 0.1, ME 0.8, PENGU 0.02, BIO 0.08,
VANA 4, TRUMP 8, VIRTUAL 1.2, S 0.2, BERA 2, KAITO 1.2, IP 5, LAYER 0.5, INIT 0.5,
SIGN 0.07, NEWT 0.3, TREE 0.25, WLFI 0.15, PUMP 0.004, ASTER 1.2, JST 0.035, SUN 0.02,
NMR 15, PEOPLE 0.02, LPT 6, RPL 6, COTI 0.05, TRB 30, UMA 1.3, ALICE 0.35, C98 0.05,
JOE 0.15, HOOK 0.1, CYBER 1.2, ARPA 0.02, BICO 0.1, OGN 0.06, POWR 0.15, CVC 0.08,
DENT 0.0008, HIGH 0.4, RDNT 0.02`

// syntheticNasdaq and syntheticNYSE list stocks: ticker, price level, sector.
const syntheticNasdaq = `
AAPL 230 Technology, MSFT 420 Technology, NVDA 180 Technology, AMZN 220 Consumer,
GOOGL 200 Communication, META 700 Communication, TSLA 420 Consumer, AVGO 340 Technology,
COST 920 Consumer, NFLX 1100 Communication, AMD 220 Technology, PEP 145 Staples,
ADBE 350 Technology, CSCO 68 Technology, INTC 24 Technology, TMUS 235 Communication,
QCOM 165 Technology, TXN 190 Technology, INTU 650 Technology, AMAT 200 Technology,
AMGN 290 Health, ISRG 520 Health, BKNG 5000 Consumer, HON 210 Industrials,
SBUX 90 Consumer, GILD 115 Health, MDLZ 62 Staples, ADP 300 Industrials, VRTX 450 Health,
REGN 600 Health, ADI 230 Technology, LRCX 110 Technology, MU 150 Technology,
PANW 190 Technology, KLAC 800 Technology, SNPS 480 Technology, CDNS 300 Technology,
MELI 2100 Consumer, PYPL 70 Financials, ASML 750 Technology, ABNB 130 Consumer,
CRWD 450 Technology, MRVL 75 Technology, ORLY 95 Consumer, CTAS 200 Industrials,
FTNT 100 Technology, MAR 270 Consumer, CSX 35 Industrials, PCAR 100 Industrials,
WDAY 250 Technology, DASH 250 Consumer, PLTR 170 Technology, COIN 320 Financials,
ROST 150 Consumer, DDOG 140 Technology, ZS 260 Technology, TEAM 180 Technology,
MNST 65 Staples, KDP 33 Staples, LULU 200 Consumer`

const syntheticNYSE = `
JPM 300 Financials, V 340 Financials, MA 560 Financials, UNH 330 Health, JNJ 175 Health,
WMT 100 Staples, PG 155 Staples, XOM 115 Energy, CVX 155 Energy, HD 390 Consumer,
KO 70 Staples, MRK 85 Health, ABBV 210 Health, BAC 50 Financials, LLY 800 Health,
ORCL 250 Technology, CRM 250 Technology, DIS 112 Communication, MCD 295 Consumer,
PFE 25 Health, T 27 Communication, VZ 41 Communication, NKE 70 Consumer,
IBM 280 Technology, GE 290 Industrials, CAT 470 Industrials, BA 210 Industrials,
GS 780 Financials, MS 150 Financials, C 95 Financials, WFC 80 Financials,
BLK 1100 Financials, AXP 340 Financials, UPS 95 Industrials, RTX 160 Industrials,
LMT 470 Industrials, DE 480 Industrials, SPGI 500 Financials, NEE 80 Utilities,
DUK 120 Utilities, SO 92 Utilities, MMM 155 Industrials, UBER 90 Technology,
SHOP 150 Technology, BRK.B 490 Financials, TSM 290 Technology, BABA 160 Consumer,
NOW 900 Technology, ACN 250 Technology, TMO 520 Health`

// syntheticArca, syntheticAmex and syntheticBats list the funds and
// stocks of the other exchanges the catalogue serves: NYSE Arca lists most
// ETFs, NYSE American ("amex") small caps, Cboe BZX ("bats") funds and its
// operator's own stock.
const syntheticArca = `
SPY 600 Fund, IWM 230 Fund, GLD 250 Fund, SLV 28 Fund, XLF 50 Fund, XLE 90 Fund,
XLK 230 Fund, XLV 145 Fund, DIA 440 Fund, EEM 45 Fund, EFA 80 Fund, VTI 290 Fund,
VOO 550 Fund, HYG 80 Fund, LQD 110 Fund, ARKK 55 Fund, KRE 60 Fund, XBI 90 Fund,
GDX 40 Fund, USO 75 Fund`

const syntheticAmex = `
IMO 70 Energy, LEU 80 Energy, UEC 7 Energy, MAG 15 Materials, EQX 7 Materials,
NGD 4 Materials, SVM 4 Materials, BTG 3 Materials`

const syntheticBats = `
CBOE 210 Financials, VXX 50 Fund, SVXY 45 Fund, VIXY 40 Fund, UVXY 25 Fund, BUFR 30 Fund`

// syntheticStockTables are the stock tables by catalogue exchange: a
// symbol is listed on one exchange, as on the US market.
var syntheticStockTables = map[string]string{"nasdaq": syntheticNasdaq, "nyse": syntheticNYSE,
	"arca": syntheticArca, "amex": syntheticAmex, "bats": syntheticBats}

// syntheticCurrencies lists currencies with their value in USD and their
// policy-rate and inflation levels (percent), for the forex universe.
const syntheticCurrencies = `
USD 1 4.25 2.9, EUR 1.08 2.15 2.1, GBP 1.27 4.0 3.6, JPY 0.00667 0.5 3.0, CHF 1.136 0.0 0.2,
AUD 0.66 3.6 2.4, CAD 0.735 2.5 2.0, NZD 0.60 3.0 2.7`

// Forex pairs in market convention: majors against USD, crosses between the
// other six currencies.
const (
	syntheticForexMajors = "EUR_USD GBP_USD USD_JPY USD_CHF AUD_USD USD_CAD NZD_USD"
	syntheticForexMinors = "EUR_GBP EUR_JPY EUR_CHF EUR_AUD EUR_CAD EUR_NZD GBP_JPY GBP_CHF GBP_AUD " +
		"GBP_CAD GBP_NZD AUD_JPY AUD_CHF AUD_CAD AUD_NZD CAD_JPY CAD_CHF CHF_JPY NZD_JPY NZD_CHF NZD_CAD"
)
