// Prints your usage this month, the five biggest movers of Binance spot
// with the verdict of each, and a screen of growth assets not yet overbought.
// Run from clients/typescript:
//   MARKET_API_URL=https://host/api/v1/public MARKET_API_KEY=msk_live_… \
//     npx tsc && node .build/example/screener.js
import { ApiError, createClient } from "../src/index.js";

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};
const api = createClient({
  baseUrl: env.MARKET_API_URL ?? "http://localhost:8080/api/v1/public",
  apiKey: env.MARKET_API_KEY ?? "",
});

try {
  const usage = await api.get("/usage");
  console.log(`${usage.tier}: ${usage.used_this_month} requests this month`);

  const rows = await api.get("/screener/{market_type}/{exchange}/{instrument}", {
    path: { market_type: "crypto", exchange: "binance", instrument: "spot" },
  });
  const movers = [...(rows ?? [])].sort((a, b) => Math.abs(b.change_pct) - Math.abs(a.change_pct)).slice(0, 5);
  for (const row of movers) {
    const report = await api.get("/analytics/{market}/{symbol}", {
      path: { market: "crypto", symbol: row.symbol },
      query: { style: "swing", lang: "en" },
    });
    console.log(`${row.symbol} ${row.change_pct.toFixed(2)}% → ${report.verdict} (${report.overall_score})`);
  }

  // Your own condition over every report of the market, in one call.
  const page = await api.post("/screener/query", {
    body: { market: "crypto", where: 'verdict == "growth" && factors.rsi_14.value < 40', order_by: "overall_score desc", limit: 5 },
  });
  for (const it of page.items) {
    console.log(`${it.symbol} ${it.verdict} (${it.overall_score}), RSI ${it["factors.rsi_14.value"]}`);
  }
} catch (e) {
  if (e instanceof ApiError) {
    // problem.type is stable: branch on it, not on the detail text.
    console.error(`${e.status} ${e.problem?.type}: ${e.message}`);
  } else {
    throw e;
  }
}
