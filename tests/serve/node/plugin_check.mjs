// Runs the OpenClaw plugin's registered hook (examples/openclaw_plugin) against a real
// replyguard serve, with a recording stand-in for OpenClaw's plugin api (the gateway itself
// is not started here). Usage: node plugin_check.mjs BASE_URL API_KEY DEAD_URL; prints JSON.
import plugin from "../../../examples/openclaw_plugin/index.js";

const [serverUrl, apiKey, deadUrl] = process.argv.slice(2);
const warnings = [];

function hookFor(pluginConfig) {
  const hooks = {};
  plugin.register({
    pluginConfig,
    logger: { warn: (message) => warnings.push(message), info() {}, error() {} },
    on: (name, handler, options) => {
      hooks[name] = { handler, options };
    },
  });
  return hooks.before_agent_finalize;
}

const event = {
  sessionId: "s1",
  stopHookActive: false,
  lastAssistantMessage: "Done: the report.",
  messages: [
    { role: "system", content: "Always date reports." },
    { role: "user", content: [{ type: "text", text: "Write the weekly report." }] },
    { role: "assistant", content: "Done: the report." },
  ],
};
const hook = hookFor({ serverUrl, apiKey, timeoutMs: 3000, maxRetries: 2 });
const seen = { registered: Object.keys(hook ?? {}), budget: hook?.options?.timeoutMs };
seen.failed = (await hook.handler(event, {})) ?? null;
seen.passed = (await hook.handler(event, {})) ?? null;
seen.wrongKey = (await hookFor({ serverUrl, apiKey: "wrong" }).handler(event, {})) ?? null;
seen.unreachable = (await hookFor({ serverUrl: deadUrl }).handler(event, {})) ?? null;
seen.slow = (await hookFor({ serverUrl, apiKey, timeoutMs: 300 }).handler(event, {})) ?? null;
seen.warnings = warnings;
console.log(JSON.stringify(seen));
