// replyguard for OpenClaw: before a natural final answer is accepted, replyguard serve judges
// it; on FAIL the agent gets one more pass with the judge's feedback; on any error, the
// answer goes out unchanged. Needs plugins.entries.replyguard.hooks.allowConversationAccess.
import { judgeFinalAnswer } from "./verify.js";

export default {
  id: "replyguard",
  name: "replyguard",
  description: "Judge each final answer with replyguard serve; retry with feedback on FAIL; fail open.",
  register(api) {
    const config = api.pluginConfig ?? {};
    const budget = Math.min((config.timeoutMs ?? 10000) + 1000, 15000);
    api.on(
      "before_agent_finalize",
      (event) => judgeFinalAnswer(event, config, { log: api.logger }),
      { timeoutMs: budget },
    );
  },
};
