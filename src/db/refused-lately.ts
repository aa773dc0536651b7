/**
 * Keys (accounts, API keys) whose group a combined statement (src/db/group-commit.ts GroupStatement)
 * raised for lately, until when: their groups go statement by statement meanwhile, rather than be sent
 * twice each time. Bounded: the oldest key is forgotten first.
 */
export class RefusedLately {
  readonly #until = new Map<string, number>();

  constructor(
    readonly ms = 5_000,
    readonly max = 10_000,
  ) {}

  has(key: string): boolean {
    const until = this.#until.get(key);
    if (until === undefined) return false;
    if (until > Date.now()) return true;
    this.#until.delete(key);
    return false;
  }

  note(keys: readonly string[]): void {
    const until = Date.now() + this.ms;
    for (const k of keys) {
      if (this.#until.size >= this.max) this.#until.delete(this.#until.keys().next().value as string);
      this.#until.set(k, until);
    }
  }
}
