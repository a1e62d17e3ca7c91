exports.handler = async () => ({ a: 1, b: [true, null], c: { d: 'e' } });
