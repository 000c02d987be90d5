// Drives replyguard serve with the official openai npm package, as a Node user would.
// Usage: node client.mjs BASE_URL API_KEY; prints one JSON object with what each call showed.
import OpenAI from "openai";

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Write the weekly report." },
];
const seen = {};

const { data, response } = await client.chat.completions
  .create({ model: "gpt-4o", messages, temperature: 0.2 })
  .withResponse();
seen.whole = {
  content: data.choices[0].message.content,
  replyguard: data.replyguard,
  usage: data.usage,
  header: response.headers.get("x-replyguard-status"),
};

const stream = await client.chat.completions.create({
  model: "gpt-4o",
  messages,
  stream: true,
  stream_options: { include_usage: true },
});
const pieces = [];
let last = null;
for await (const chunk of stream) {
  for (const choice of chunk.choices) pieces.push(choice.delta?.content ?? "");
  last = chunk;
}
seen.streamed = { content: pieces.join(""), replyguard: last?.replyguard, usage: last?.usage };

const wrong = new OpenAI({ baseURL, apiKey: "not-the-key", maxRetries: 0 });
try {
  await wrong.chat.completions.create({ model: "gpt-4o", messages });
  seen.unauthorized = { status: 200 };
} catch (error) {
  seen.unauthorized = { status: error.status, type: error.type, name: error.constructor.name };
}
console.log(JSON.stringify(seen));
