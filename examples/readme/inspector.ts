// examples/readme/inspector.ts
import { createAgentMachine } from 'loopchart';
import { scriptedModel } from 'loopchart/testing';
import { viewerInspector } from 'loopchart/viewer';
import { createActor, toPromise } from 'xstate';

const inspector = viewerInspector(); // a page on 127.0.0.1, on a free port
const agent = createAgentMachine({ model: scriptedModel([{ text: 'Hello!' }]) });
// The option is the inspector's `inspect` function, not the inspector object.
const actor = createActor(agent, { input: { prompt: 'Hi' }, inspect: inspector.inspect }).start();
const url = await inspector.ready; // open it in a browser while the actor runs
console.log(url.startsWith('http://127.0.0.1:')); // true
console.log((await toPromise(actor)).outcome.type); // Completed
await inspector.close();
