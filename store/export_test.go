package store

// CandlesByRows is the row-per-candle read Candles replaced
// (BenchmarkCandles500 compares the two).
var CandlesByRows = (*DB).candlesByRows
