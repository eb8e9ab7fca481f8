/**
 * `loopchart/viewer`: see every run offline. A local page (127.0.0.1) with the brain's
 * statechart generated from its definition, a timeline of each run's steps from the session's
 * trace, the conversation as the model saw it at any step, live updates from the store; one
 * self-contained HTML export per session; and `viewerInspector()` for any live actor.
 * Node's http server only; the page script is plain DOM, built into the package.
 */
export { startViewer, exportSessionHtml, ViewerListenError, DEFAULT_VIEWER_PORT, VIEWER_HOST, type ViewerOptions, type RunningViewer } from './viewer/server.js';
export { brainChart, chartOf, type ChartModel, type ChartState, type ChartTransition } from './viewer/chart.js';
export { viewerInspector, type ViewerInspector, type ViewerInspectorOptions } from './viewer/inspector.js';
export { type ViewerAccessRequest, type ViewerAuthorizer } from './viewer/access.js';
export { ViewerOptionsError, LiveLimitsSchema, type LiveLimits, type LiveLimitsInput, type LiveStats } from './viewer/sse.js';
