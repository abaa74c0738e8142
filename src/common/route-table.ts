/** Path parameters of a matched route (`:id` segments), percent-decoded. */
export type RouteParams = Readonly<Record<string, string>>;

export type RouteMatch<H> =
  | { readonly kind: 'found'; readonly handler: H; readonly params: RouteParams }
  | { readonly kind: 'method_not_allowed'; readonly allow: string }
  | { readonly kind: 'not_found' };

export interface RouteTableOptions {
  /** Match `/a/` like `/a` (the management API's habit). Default false: paths match exactly. */
  ignoreTrailingSlash?: boolean;
}

interface PathRoutes<H> {
  /** Prebuilt `found` answers for literal paths, so a hit allocates nothing. */
  readonly byMethod: Map<string, RouteMatch<H> & { kind: 'found' }>;
  readonly handlers: Map<string, H>;
  wrongMethod: RouteMatch<H> & { kind: 'method_not_allowed' };
}

interface Pattern<H> {
  readonly segments: readonly string[];
  readonly routes: PathRoutes<H>;
}

const EMPTY_PARAMS: RouteParams = Object.freeze({});
const NOT_FOUND = Object.freeze({ kind: 'not_found' as const });

/**
 * Method + path → handler. Literal paths are one Map lookup each for the path and the method; paths
 * with `:name` segments (`/v1/instances/:id`) are tried in registration order only when no literal
 * path matched. A path with routes for other methods answers `method_not_allowed` with its `Allow`.
 */
export class RouteTable<H> {
  private readonly literal = new Map<string, PathRoutes<H>>();
  private readonly patterns: Pattern<H>[] = [];
  private readonly ignoreTrailingSlash: boolean;

  constructor(options: RouteTableOptions = {}) {
    this.ignoreTrailingSlash = options.ignoreTrailingSlash ?? false;
  }

  /** Adds a route; `path` may hold `:name` segments. Throws on a duplicate method + path. */
  add(method: string, path: string, handler: H): this {
    if (!path.startsWith('/')) throw new Error(`route path must start with '/': ${path}`);
    const segments = path.split('/');
    const isPattern = segments.some((s) => s.startsWith(':'));
    let routes = isPattern
      ? this.patterns.find((p) => p.segments.join('/') === path)?.routes
      : this.literal.get(path);
    if (!routes) {
      routes = {
        byMethod: new Map(),
        handlers: new Map(),
        wrongMethod: { kind: 'method_not_allowed', allow: '' },
      };
      if (isPattern) this.patterns.push({ segments, routes });
      else this.literal.set(path, routes);
    }
    if (routes.handlers.has(method)) throw new Error(`duplicate route ${method} ${path}`);
    routes.handlers.set(method, handler);
    routes.byMethod.set(method, Object.freeze({ kind: 'found' as const, handler, params: EMPTY_PARAMS }));
    routes.wrongMethod = Object.freeze({
      kind: 'method_not_allowed' as const,
      allow: [...routes.handlers.keys()].join(', '),
    });
    return this;
  }

  match(method: string, path: string): RouteMatch<H> {
    const key =
      this.ignoreTrailingSlash && path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : path;
    const routes = this.literal.get(key);
    if (routes !== undefined) return routes.byMethod.get(method) ?? routes.wrongMethod;
    return this.patterns.length === 0 ? NOT_FOUND : this.matchPattern(method, key);
  }

  private matchPattern(method: string, path: string): RouteMatch<H> {
    const parts = path.split('/');
    for (const { segments, routes } of this.patterns) {
      const params = bindParams(segments, parts);
      if (params === undefined) continue;
      const handler = routes.handlers.get(method);
      return handler === undefined ? routes.wrongMethod : { kind: 'found', handler, params };
    }
    return NOT_FOUND;
  }
}

/** The params when `parts` fit `segments`; undefined when not (or a param is not valid percent-encoding). */
function bindParams(segments: readonly string[], parts: readonly string[]): RouteParams | undefined {
  if (segments.length !== parts.length) return undefined;
  let params: Record<string, string> | undefined;
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    const part = parts[i]!;
    if (!segment.startsWith(':')) {
      if (segment !== part) return undefined;
      continue;
    }
    if (part === '') return undefined;
    let value: string;
    try {
      value = decodeURIComponent(part);
    } catch {
      return undefined;
    }
    (params ??= {})[segment.slice(1)] = value;
  }
  return params ?? EMPTY_PARAMS;
}
