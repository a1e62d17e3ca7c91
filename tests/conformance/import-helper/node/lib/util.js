exports.answer = () => 42;
