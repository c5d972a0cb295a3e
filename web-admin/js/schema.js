// A JSON Schema check for edited tool arguments, before they are sent:
// the keywords tool schemas use (draft-07 as zod-to-json-schema writes
// it). The gateway checks again with its own validator and has the last
// word; this one names the first problem the way the gateway does
// ("$.to: expected string, got number").

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(want, v) {
  const got = typeOf(v);
  return want === got || (want === 'number' && got === 'integer');
}

function jsonEq(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

function key(path, k) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`;
}

// The first problem with value v under schema s, or null. depth bounds
// nested schemas (the gateway accepts at most 32 levels).
export function validate(s, v, path = '$', depth = 0) {
  if (depth > 64) return `${path}: nested too deeply`;
  if (s === true || s === undefined || s === null) return null;
  if (s === false) return `${path}: no value is allowed here`;
  if (typeof s !== 'object') return null;
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const ok = types.some((t) => typeMatches(t, v)) || (s.nullable === true && v === null);
    if (!ok) return `${path}: expected ${types.join(' or ')}, got ${typeOf(v) === 'integer' ? 'number' : typeOf(v)}`;
  }
  if (s.enum && !s.enum.some((x) => jsonEq(x, v))) {
    return `${path}: must be one of ${s.enum.map((x) => JSON.stringify(x)).join(', ')}`;
  }
  if ('const' in s && !jsonEq(s.const, v)) return `${path}: must be ${JSON.stringify(s.const)}`;
  const t = typeOf(v);
  if (t === 'string') {
    const n = [...v].length;
    if (s.minLength !== undefined && n < s.minLength) return `${path}: shorter than ${s.minLength} characters`;
    if (s.maxLength !== undefined && n > s.maxLength) return `${path}: longer than ${s.maxLength} characters`;
    if (typeof s.pattern === 'string') {
      let re = null;
      try { re = new RegExp(s.pattern, 'u'); } catch { re = null; }
      if (re && !re.test(v)) return `${path}: does not match the pattern ${s.pattern}`;
    }
  }
  if (t === 'number' || t === 'integer') {
    if (s.minimum !== undefined && v < s.minimum) return `${path}: below the minimum ${s.minimum}`;
    if (s.maximum !== undefined && v > s.maximum) return `${path}: above the maximum ${s.maximum}`;
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum) return `${path}: must be above ${s.exclusiveMinimum}`;
    if (typeof s.exclusiveMaximum === 'number' && v >= s.exclusiveMaximum) return `${path}: must be below ${s.exclusiveMaximum}`;
  }
  if (t === 'array') {
    if (s.minItems !== undefined && v.length < s.minItems) return `${path}: fewer than ${s.minItems} items`;
    if (s.maxItems !== undefined && v.length > s.maxItems) return `${path}: more than ${s.maxItems} items`;
    if (s.items && typeof s.items === 'object' && !Array.isArray(s.items)) {
      for (let i = 0; i < v.length; i++) {
        const err = validate(s.items, v[i], `${path}[${i}]`, depth + 1);
        if (err) return err;
      }
    }
  }
  if (t === 'object') {
    for (const r of s.required || []) {
      if (!Object.prototype.hasOwnProperty.call(v, r)) return `${path}: missing required property ${JSON.stringify(r)}`;
    }
    const props = s.properties || {};
    for (const [k, x] of Object.entries(v)) {
      if (Object.prototype.hasOwnProperty.call(props, k)) {
        const err = validate(props[k], x, key(path, k), depth + 1);
        if (err) return err;
      } else if (s.additionalProperties === false) {
        return `${key(path, k)}: additional property not allowed`;
      } else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        const err = validate(s.additionalProperties, x, key(path, k), depth + 1);
        if (err) return err;
      }
    }
  }
  for (const sub of s.allOf || []) {
    const err = validate(sub, v, path, depth + 1);
    if (err) return err;
  }
  if (Array.isArray(s.anyOf) && !s.anyOf.some((sub) => !validate(sub, v, path, depth + 1))) {
    return `${path}: matches none of the allowed shapes`;
  }
  if (Array.isArray(s.oneOf) && s.oneOf.filter((sub) => !validate(sub, v, path, depth + 1)).length !== 1) {
    return `${path}: must match exactly one of the allowed shapes`;
  }
  return null;
}

// Parses text as the tool's arguments and checks them: {value} or {error}.
export function checkArgs(schema, text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { error: `Not valid JSON: ${e.message}` };
  }
  if (typeOf(value) !== 'object') return { error: '$: expected object (the tool\'s arguments)' };
  const err = validate(schema, value);
  return err ? { error: err } : { value };
}
