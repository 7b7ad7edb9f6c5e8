// A flock worker (command:) that calls a model API with an official SDK,
// as an operator's own program would: the SDK reads its base URL and key
// from the environment flock gives the agent (ANTHROPIC_BASE_URL,
// OPENAI_BASE_URL and GOOGLE_GEMINI_BASE_URL at flock-proxy, placeholder
// keys) and knows nothing of flock. The task's payload says which SDK,
// whether to stream, and the prompt: "anthropic stream: say hello";
// "gemini: ..." asks for thinking and names a cached content, so that
// every count of Gemini's usage is there; "local: ..." is the OpenAI SDK
// pointed at the grant of provider local (FLOCK_MODEL_URL_LOCAL: a
// model server on the host, as Ollama). It prints the answer's text and
// the usage the SDK saw; an API error is printed with its status and
// message, and the task fails.
const readStdin = async () => {
  let s = "";
  for await (const chunk of process.stdin) s += chunk;
  return s.trim();
};

async function main() {
  const payload = await readStdin();
  const m = payload.match(/^(anthropic|openai|gemini|local)( stream)?: (.*)$/s);
  if (!m) throw new Error(`payload ${JSON.stringify(payload)}: want "anthropic|openai|gemini|local[ stream]: PROMPT"`);
  const [, sdk, stream, prompt] = m;
  if (sdk === "gemini") {
    const { GoogleGenAI } = await import("@google/genai");
    const ai = new GoogleGenAI({});
    const req = { model: "gemini-standin", contents: prompt,
      config: { thinkingConfig: { thinkingBudget: 64 }, cachedContent: "cachedContents/standin" } };
    if (stream) {
      // Each chunk restates the usage so far: the last one is the answer's.
      let text = "", usage = null;
      for await (const chunk of await ai.models.generateContentStream(req)) {
        text += chunk.text ?? "";
        if (chunk.usageMetadata) usage = chunk.usageMetadata;
      }
      console.log(JSON.stringify({ text, usage }));
    } else {
      const r = await ai.models.generateContent(req);
      console.log(JSON.stringify({ text: r.text, usage: r.usageMetadata }));
    }
    return;
  }
  if (sdk === "anthropic") {
    const { default: Anthropic } = await import("@anthropic-ai/sdk");
    const client = new Anthropic({ maxRetries: 0 });
    const req = { model: "claude-standin", max_tokens: 256, messages: [{ role: "user", content: prompt }] };
    if (stream) {
      const s = client.messages.stream(req);
      let text = "";
      for await (const ev of s) {
        if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
      }
      const msg = await s.finalMessage();
      console.log(JSON.stringify({ text, usage: msg.usage }));
    } else {
      const msg = await client.messages.create(req);
      console.log(JSON.stringify({ text: msg.content.map((b) => b.text).join(""), usage: msg.usage }));
    }
    return;
  }
  const { default: OpenAI } = await import("openai");
  const client = new OpenAI(sdk === "local" ? { maxRetries: 0, baseURL: process.env.FLOCK_MODEL_URL_LOCAL } : { maxRetries: 0 });
  const req = { model: "gpt-standin", messages: [{ role: "user", content: prompt }] };
  if (stream) {
    // No stream_options: flock's gateway asks for the usage itself.
    const s = await client.chat.completions.create({ ...req, stream: true });
    let text = "", usage = null;
    for await (const chunk of s) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    console.log(JSON.stringify({ text, usage }));
  } else {
    const c = await client.chat.completions.create(req);
    console.log(JSON.stringify({ text: c.choices[0].message.content, usage: c.usage }));
  }
}

main().catch((e) => {
  console.error(e.status ? `${e.status} ${e.message}` : String(e.stack || e));
  process.exit(1);
});
