// The plugin's one job, free of OpenClaw: ask replyguard serve (POST /v1/verify) about a final
// answer, and turn its judgement into a before_agent_finalize decision. Fails open: an error,
// a timeout, an unreadable answer or any status but "failed" lets the answer through.

const RETRY_KEY = "replyguard:verify";

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part.text === "string" ? part.text : ""))
      .filter(Boolean)
      .join("\n");
  }
  return "";
}

/** The turn JSON replyguard reads, from the run's messages (OpenAI-style roles). */
export function turnOf(messages) {
  const list = Array.isArray(messages) ? messages.filter((m) => m && typeof m.role === "string") : [];
  let last = -1;
  list.forEach((m, i) => {
    if (m.role === "user") last = i;
  });
  const rules = list.filter((m) => m.role === "system").map((m) => text(m.content)).filter(Boolean);
  const history = list
    .filter((m, i) => i !== last && m.role !== "system" && (m.role === "user" || m.role === "assistant"))
    .map((m) => ({ role: m.role, content: text(m.content) }));
  const turn = { userMessage: last >= 0 ? text(list[last].content) : "", history };
  if (rules.length) turn.rules = rules;
  return turn;
}

/**
 * The decision for one natural final answer: `undefined` (send it) or
 * `{ action: "revise", reason, retry }` carrying replyguard's retry message.
 */
export async function judgeFinalAnswer(event, config, { fetchImpl = fetch, log } = {}) {
  const answer = event?.lastAssistantMessage;
  if (typeof answer !== "string" || !answer.trim() || !config?.serverUrl) return undefined;
  const headers = { "content-type": "application/json" };
  if (config.apiKey) headers.authorization = `Bearer ${config.apiKey}`;
  try {
    const response = await fetchImpl(new URL("/v1/verify", config.serverUrl), {
      method: "POST",
      headers,
      body: JSON.stringify({ turn: turnOf(event.messages), reply: answer }),
      signal: AbortSignal.timeout(config.timeoutMs ?? 10000),
    });
    if (!response.ok) {
      log?.warn?.(`replyguard: /v1/verify answered ${response.status}; the answer is sent as it is`);
      return undefined;
    }
    const judged = await response.json();
    if (judged?.status !== "failed") return undefined;
    const instruction = judged.retryMessage || judged.feedback;
    if (typeof instruction !== "string" || !instruction.trim()) return undefined;
    return {
      action: "revise",
      reason: `replyguard: the answer failed review (${judged.category ?? "unspecified"})`,
      retry: {
        instruction,
        idempotencyKey: RETRY_KEY,
        maxAttempts: config.maxRetries ?? 2,
      },
    };
  } catch (error) {
    log?.warn?.(`replyguard: ${error?.name ?? "error"}; the answer is sent as it is`);
    return undefined;
  }
}
