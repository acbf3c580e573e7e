/**
 * The Iggy targets a map names outright: the default target and every rule whose stream and
 * topic templates have no capture references. Targets built from captures exist only for the
 * topics devices publish, so they are not listed here.
 *
 * @module
 */
import type { CompiledMap } from "./types.ts";
import { constantOf, parseTemplate } from "./template.ts";

/** A (stream, topic) pair. */
export interface Target {
  readonly stream: string;
  readonly topic: string;
}

/** The map's constant targets, each once, in map order (default first). */
export function constantTargets(map: CompiledMap): Target[] {
  const out = new Map<string, Target>();
  const add = (stream: string, topic: string) => out.set(`${stream}/${topic}`, { stream, topic });
  add(map.defaultStream, map.defaultTopic);
  for (const r of map.rules) {
    const stream = constantText(r.stream);
    const topic = constantText(r.topic);
    if (stream !== null && topic !== null) add(stream, topic);
  }
  return [...out.values()];
}

/** A compiled template's text when it is a constant ($$ unescaped), else null. */
function constantText(template: string): string | null {
  // The map compiled, so every reference is valid: the group count only has to be large.
  const parsed = parseTemplate(template, Number.MAX_SAFE_INTEGER);
  return parsed.parts ? constantOf(parsed.parts) : null;
}
