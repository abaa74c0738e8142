/**
 * A small well-formedness check for the SVG we write (no XML library): every tag is closed in
 * order, attribute values are double-quoted, and text holds no raw `<` or bare `&`. Returns the
 * first problem, or null. Used by tests; covers the subset of XML that `renderSvg` emits.
 */
export function xmlProblem(xml: string): string | null {
  const stack: string[] = [];
  const tag = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g;
  let last = 0;
  for (let m = tag.exec(xml); m; m = tag.exec(xml)) {
    const text = xml.slice(last, m.index);
    if (/<|&(?!(lt|gt|amp|quot|apos|#\d+);)/.test(text))
      return `bad text before offset ${m.index}: ${text.slice(0, 40)}`;
    last = tag.lastIndex;
    const [, close, name, , selfClose] = m;
    if (close) {
      const open = stack.pop();
      if (open !== name) return `</${name}> closes <${open ?? 'nothing'}> at offset ${m.index}`;
    } else if (!selfClose) stack.push(name!);
  }
  if (xml.slice(last).trim() !== '') return `trailing text: ${xml.slice(last, last + 40)}`;
  if (stack.length > 0) return `unclosed <${stack.join('>, <')}>`;
  return null;
}
