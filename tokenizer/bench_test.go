package tokenizer

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

const englishParagraph = `The history of computing is a story of abstraction layered upon abstraction. ` +
	`In the early days, programmers wrote instructions directly in machine code, flipping switches ` +
	`and punching cards to tell the hardware exactly which operations to perform. Assembly language ` +
	`offered a thin veneer of readability, replacing numeric opcodes with short mnemonics, but the ` +
	`programmer still had to think in terms of registers, memory addresses, and jumps. The arrival of ` +
	`high-level languages such as FORTRAN and COBOL in the late 1950s changed everything: suddenly, ` +
	`scientists and business analysts could express their intentions in something resembling ` +
	`mathematical notation or plain English, and a compiler would translate those intentions into ` +
	`efficient machine instructions. Over the following decades, each generation of tools raised the ` +
	`level of abstraction further. Structured programming tamed the chaos of unrestricted jumps; ` +
	`object-oriented design bundled data together with the operations that act upon it; functional ` +
	`programming emphasized immutable values and composable transformations. Operating systems hid the ` +
	`messy details of disks, terminals, and network cards behind tidy interfaces, while databases let ` +
	`developers describe what data they wanted rather than how to retrieve it. Today, a single line of ` +
	`code can summon a distributed cluster of machines, train a statistical model on billions of ` +
	`examples, or render a photorealistic scene in real time. Yet beneath every one of these ` +
	`conveniences, the same fundamental operations still take place: bits are loaded, compared, ` +
	`shifted, and stored, billions of times per second, by circuits whose basic design would be ` +
	`recognizable to the engineers of the 1960s. Understanding this layered structure is what allows ` +
	`an experienced engineer to diagnose a performance problem, reason about a security vulnerability, ` +
	`or decide when it is worth dropping down a level to do something the higher layers were never ` +
	`designed to handle. It's not that the lower layers matter more; it's that they don't go away, ` +
	`and they'll shape what's possible whether or not we've chosen to look at them.`

var (
	mixedWords = strings.Fields("the of and to in is that for it as with was on be by this are from at or have an not which but " +
		"model token vocabulary inference memory kernel attention softmax matrix gradient latency throughput")
	mixedCode = []string{
		"func (t *Tokenizer) Encode(text string) []int32 {\n\treturn t.encode(text)\n}\n",
		"for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n",
		"def forward(self, x):\n    return self.proj(torch.relu(x)) ** 2\n",
		`{"id": 42, "name": "widget", "tags": ["a", "b"], "price": 19.99}` + "\n",
		"SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id;\n",
	}
	mixedCJK   = []rune("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坐集编宝谈府拉黑且随格尽剑讲布杀微怕母调局根曾准团段终乐切级克精哪官示冷域假")
	mixedEmoji = []rune("😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘👍👎👏🙏💪🎉🔥✨🌟⭐🍕🍔🚀🛸🌍🌈❤💔💯✅❌")
)

// mixedText deterministically builds n bytes of English, code, numbers,
// CJK and emoji.
func mixedText(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	b.Grow(n + 256)
	for b.Len() < n {
		switch k := r.IntN(10); {
		case k < 4:
			for i := 0; i < 5+r.IntN(20); i++ {
				w := mixedWords[r.IntN(len(mixedWords))]
				if i == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				b.WriteString(w)
				b.WriteByte(' ')
			}
			b.WriteString(". ")
		case k < 6:
			b.WriteString(mixedCode[r.IntN(len(mixedCode))])
		case k < 7:
			b.WriteString(strconv.Itoa(r.IntN(1_000_000)))
			b.WriteString(", ")
			b.WriteString(strconv.FormatFloat(r.Float64()*1000, 'f', 3, 64))
			b.WriteByte(' ')
		case k < 9:
			for i := 0; i < 8+r.IntN(30); i++ {
				b.WriteRune(mixedCJK[r.IntN(len(mixedCJK))])
			}
			b.WriteString("。\n")
		default:
			for i := 0; i < 1+r.IntN(4); i++ {
				b.WriteRune(mixedEmoji[r.IntN(len(mixedEmoji))])
			}
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func BenchmarkEncode(b *testing.B) {
	mixed := mixedText(1 << 20)
	for _, name := range vocabNames {
		tk := loadTokenizer(b, name)
		for _, in := range []struct{ name, text string }{{"english", englishParagraph}, {"mixed1MB", mixed}} {
			b.Run(name+"/"+in.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				tokens := 0
				for b.Loop() {
					tokens += len(tk.Encode(in.text))
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	mixed := mixedText(1 << 20)
	for _, name := range vocabNames {
		tk := loadTokenizer(b, name)
		ids := tk.Encode(mixed)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_ = tk.Decode(ids)
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
		b.Run(name+"/stream", func(b *testing.B) {
			for b.Loop() {
				s := tk.NewStream()
				for _, id := range ids {
					_ = s.Add(id)
				}
				_ = s.Flush()
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkNew collects garbage outside the timed region: the test binary
// holds four vocabularies, whose marking would otherwise be charged to
// whichever New happens to trigger a cycle.
func BenchmarkNew(b *testing.B) {
	for _, name := range vocabNames {
		v := loadVocab(b, name)
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				runtime.GC()
				b.StartTimer()
				if _, err := New(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLoadTime keeps an eye on New's cost for the largest vocabulary; the
// bound is loose because tests share the machine (and run under -race).
func TestLoadTime(t *testing.T) {
	v := loadVocab(t, "gptoss")
	best := time.Hour
	for range 3 {
		t0 := time.Now()
		if _, err := New(v); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	t.Logf("New(gptoss, %d tokens, %d merges): %v", len(v.Tokens), len(v.Merges), best)
	if best > 5*time.Second {
		t.Errorf("New took %v", best)
	}
}

// BenchmarkPreTokenize: the split alone, per family, on 1 MB of mixed
// text (the hand scanners against the regex engine's chains).
func BenchmarkPreTokenize(b *testing.B) {
	text := mixedText(1 << 20)
	for _, name := range []string{"gpt-2", "llama-bpe", "default", "starcoder", "falcon", "deepseek-coder",
		"deepseek-llm", "deepseek-v3", "tekken", "kimi-k2", "jais-2", "tiny_aya", "bloom"} {
		b.Run(name, func(b *testing.B) {
			p, err := lookupPre(name)
			if err != nil {
				b.Fatal(err)
			}
			st := new(encState)
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if p.scan != nil {
					st.spans = scanSpans(p.scan, text, 0, st.spans[:0])
				} else {
					p.split(st, text)
				}
			}
		})
	}
}
