// The page's React surface (the repository has React but not @types/react): what main.ts uses.
declare module 'react' {
  export function createElement(type: unknown, props?: Record<string, unknown> | null, ...children: unknown[]): unknown;
  export function useState<T>(initial: T): [T, (next: T | ((previous: T) => T)) => void];
  export function useRef<T>(initial: T): { current: T };
  export function useEffect(effect: () => void | (() => void), deps?: unknown[]): void;
}
declare module 'react-dom/client' {
  export function createRoot(element: Element): { render(node: unknown): void };
}
