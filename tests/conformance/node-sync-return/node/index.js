exports.handler = function (event) {
  return { sync: true };
};
