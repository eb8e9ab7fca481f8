/**
 * `loopchart/policies`: built-in tool policies (`toolPolicy` on the agent): a call budget per
 * tool, and a path rule for file tools. Each is a plain `ToolPolicy`; list them with your own.
 */
export { callBudget, pathRule, type PathRuleOptions } from './agent/approvals/builtin-policies.js';
