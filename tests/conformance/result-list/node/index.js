exports.handler = async () => [1, 'two', null, { x: false }];
