/** The AI SDK major version whose protocol a page speaks (its `useChat` reads the stream). */
export type AiSdkVersion = 5 | 6 | 7;
