/** The viewer's stylesheet, inlined in every page (no external asset). */
export const VIEWER_STYLE = `
:root { color-scheme: light dark; --fg: #1d2127; --muted: #5d6673; --bg: #fbfbfc; --panel: #fff; --line: #d6dae0; --accent: #1f6feb; --current: #2da44e; --bad: #cf222e; font: 14px/1.45 system-ui, sans-serif; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e8eb; --muted: #9aa4b1; --bg: #0f1216; --panel: #161b22; --line: #30363d; --accent: #58a6ff; --current: #3fb950; --bad: #f85149; } }
body { margin: 0; background: var(--bg); color: var(--fg); }
nav { padding: 6px 16px; border-bottom: 1px solid var(--line); color: var(--muted); }
a { color: var(--accent); }
h1 { font-size: 18px; margin: 12px 0 6px; } h2 { font-size: 15px; margin: 10px 0 6px; } h3 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); }
header, #chart, main { padding: 0 16px; }
main.home { display: block; } .home .table { overflow-x: auto; } .home table { border-collapse: collapse; width: 100%; } .home td.id { white-space: nowrap; } .home td, .home th { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
tr.unreadable td { color: var(--bad); }
.compare td.decision { width: 48%; } .compare .kind { color: var(--muted); font-size: 12px; } .compare .what { font-family: ui-monospace, monospace; overflow-wrap: anywhere; } .compare .rule { color: var(--muted); font-size: 12px; }
.compare tr.first-difference td { background: color-mix(in srgb, var(--bad) 14%, transparent); border-top: 2px solid var(--bad); } .compare .marker { color: var(--bad); font-weight: 600; font-size: 12px; white-space: nowrap; }
.compare tr.after-difference td { opacity: 0.6; } .compare td.ended { color: var(--muted); font-style: italic; }
.error { color: var(--bad); font-weight: 600; }
dl.facts { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 4px 0; } dl.facts div { display: flex; gap: 6px; } dt { color: var(--muted); } dd { margin: 0; overflow-wrap: anywhere; }
#chart { display: grid; grid-template-columns: minmax(0, 1fr); gap: 6px; }
details.chart { min-width: 0; } details.chart > summary { cursor: pointer; } details.chart > summary h2 { display: inline; }
.chart-tools { display: flex; gap: 4px; margin: 2px 0 4px; }
.chart-tool { font: inherit; font-size: 12px; min-width: 28px; color: var(--fg); background: var(--panel); border: 1px solid var(--line); border-radius: 4px; padding: 1px 8px; cursor: pointer; }
.chart-frame { position: relative; overflow: hidden; width: 100%; border: 1px solid var(--line); background: var(--panel); touch-action: none; cursor: grab; }
.chart-frame:focus { outline: 2px solid var(--accent); outline-offset: 1px; } .chart-frame:active { cursor: grabbing; }
.chart-frame svg { display: block; }
#chart .node[data-fold] > text.title { cursor: pointer; text-decoration: underline dotted; }
#chart .node.folded > .box { stroke-width: 1.6; stroke-dasharray: 7 3; }
#chart .jump .box { fill: none; stroke: var(--muted); stroke-dasharray: 3 3; } #chart .jump text { fill: var(--muted); }
.table-scroll { overflow-x: auto; max-width: 100%; }
#chart .node .box { fill: var(--panel); stroke: var(--muted); stroke-width: 1.2; }
#chart .node.compound > .box { fill: color-mix(in srgb, var(--fg) 3%, var(--panel)); }
#chart .node.region > .box { stroke-dasharray: 5 4; fill: none; }
#chart .node.final .inner { fill: none; stroke: var(--muted); }
#chart text.label { font-family: ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace; fill: var(--fg); }
#chart text.title { font-size: 12px; font-weight: 600; } #chart text.internal { font-size: 10px; fill: var(--muted); } #chart text.edge { font-size: 10.5px; fill: var(--muted); }
#chart .edge path { fill: none; stroke: var(--muted); stroke-width: 1.1; } #chart .arrowhead { fill: var(--muted); }
#chart .edge:hover path { stroke: var(--accent); stroke-width: 2; } #chart .edge:hover text { fill: var(--fg); }
#chart .initial circle { fill: var(--fg); } #chart .initial path { fill: none; stroke: var(--muted); stroke-width: 1.1; }
#chart .node.current > .box { stroke: var(--current); stroke-width: 3; }
#chart .node.current-within > .box { stroke: var(--current); stroke-width: 1.8; }
#chart .node.selected > .box { fill: color-mix(in srgb, var(--accent) 22%, var(--panel)); stroke: var(--accent); stroke-width: 3; }
#chart .node.selected-within > .box { stroke: var(--accent); stroke-width: 2; }
details.transitions summary { cursor: pointer; color: var(--muted); font-size: 12px; }
table.transitions { font-size: 12px; border-collapse: collapse; } table.transitions td, table.transitions th { padding: 1px 8px; border-bottom: 1px solid var(--line); text-align: left; }
main { display: grid; grid-template-columns: minmax(0, 1.2fr) minmax(0, 1fr); gap: 16px; }
#timeline { position: relative; height: 420px; overflow-y: auto; border: 1px solid var(--line); background: var(--panel); }
#timeline:focus { outline: 2px solid var(--accent); outline-offset: 1px; }
#timeline .row { position: absolute; left: 0; right: 0; height: 30px; display: flex; gap: 8px; align-items: center; padding: 0 8px; box-sizing: border-box; border-bottom: 1px solid var(--line); cursor: pointer; white-space: nowrap; overflow: hidden; }
#timeline .row[aria-selected="true"] { background: color-mix(in srgb, var(--accent) 20%, transparent); }
#timeline .row.failed .kind { color: var(--bad); }
#timeline .time { color: var(--muted); font: 12px ui-monospace, monospace; flex: none; }
#timeline .kind { flex: none; width: 84px; font-weight: 600; }
#timeline .title { overflow: hidden; text-overflow: ellipsis; }
#detail { min-width: 0; } pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0; font: 12px/1.4 ui-monospace, monospace; }
.message { border-left: 3px solid var(--line); padding: 2px 8px; margin: 6px 0; background: var(--panel); }
.message header { color: var(--muted); font-size: 12px; padding: 0; }
.message.role-assistant { border-color: var(--accent); } .message.role-tool { border-color: var(--current); } .message.role-system { border-color: var(--muted); }
.hint { color: var(--muted); }
button.more { font: inherit; font-size: 12px; color: var(--accent); background: none; border: 1px solid var(--line); border-radius: 4px; padding: 1px 8px; margin: 2px 0; cursor: pointer; }
pre.expanded { max-height: 70vh; overflow: auto; } pre .chunk { display: block; content-visibility: auto; contain-intrinsic-size: auto 600px; }
@media (max-width: 900px) { main { grid-template-columns: 1fr; } }
`;
